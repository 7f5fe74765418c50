-- qoslab.plot.timeseries / latency_cdf / test_plots: pictures of one test
-- from its result table. Panels come and go with the data (checked on the
-- gnuplot script the module writes), and gnuplot makes a real PNG.
local plot = require 'qoslab.plot'

local function tmpdir()
  local p = assert(io.popen('mktemp -d /tmp/qoslab-plot-ts-spec.XXXXXX'))
  local d = p:read('l')
  p:close()
  return d
end

local function slurp(path)
  local f = io.open(path, 'rb')
  if not f then return nil end
  local s = f:read('a')
  f:close()
  return s
end

local function assert_png(path, min_w, min_h)
  local s = assert(slurp(path), 'missing ' .. path)
  assert.is_true(#s > 5000, path .. ' is too small: ' .. #s)
  assert.equal('\137PNG\r\n\26\n', s:sub(1, 8))
  local w, h = string.unpack('>I4I4', s, 17)
  assert.is_true(w >= min_w and h >= min_h, string.format('%dx%d', w, h))
end

-- A latency histogram on the probe's edges (10 per decade from 1 µs):
-- `counts` per bucket from bucket index `first` (0-based, edge 10^(k/10) µs).
local function hist(first, counts)
  local edges = {}
  for k = first, first + #counts do edges[#edges + 1] = 10 ^ (k / 10) / 1000 end
  return { per_decade = 10, below = 0, above = 0, edges_ms = edges, counts = counts }
end

local function dist(p50, p99) return { min = p50 / 2, mean = p50, p50 = p50, p90 = p99 * 0.8, p99 = p99, p999 = p99, max = p99 * 1.2 } end

-- A TCP result of 2 streams over 4 intervals, a probe beside it.
local function tcp_result(probe)
  local ivs = {}
  for i = 1, 4 do
    local iv = { start_s = (i - 1) * 0.5, end_s = i * 0.5, seconds = 0.5, omitted = i == 1, streams = {},
      sum = { sender = { bits_per_second = 2e9, retransmits = i == 3 and 7 or 0, bytes = 1 },
              receiver = { bits_per_second = 1.9e9, bytes = 1 } } }
    for _, id in ipairs { 1, 3 } do
      iv.streams[#iv.streams + 1] = { id = id, direction = 'forward', role = 'sender', side = 'client',
        bits_per_second = 1e9, rtt_us = 800 + 100 * i, snd_cwnd_bytes = 65536 * i, retransmits = 0 }
      iv.streams[#iv.streams + 1] = { id = id, direction = 'forward', role = 'receiver', side = 'server',
        bits_per_second = 0.95e9 }
    end
    if probe then iv.latency = { samples = 50, lost = i == 4 and 1 or 0, late = 0, rtt_ms = dist(1 + i, 3 + i) } end
    ivs[i] = iv
  end
  local res = { proto = 'tcp', host = '127.0.0.1', port = 5201, duration_s = 2, omit_s = 0.5, intervals = ivs,
    received = { bits_per_second = 1.9e9 } }
  if probe then
    res.latency = { proto = 'udp', interval_ms = 10, samples = 6, rtt_ms = dist(3, 6), histogram = hist(34, { 1, 2, 2, 1 }),
      idle = { samples = 4, lost = 0, late = 0, rtt_ms = dist(0.5, 0.9), histogram = hist(26, { 1, 2, 1 }) } }
  end
  return res
end

local function udp_result()
  local ivs = {}
  for i = 1, 3 do
    ivs[i] = { start_s = i - 1, end_s = i, seconds = 1, streams = {
      { id = 1, direction = 'forward', role = 'sender', side = 'client', bits_per_second = 1e7, packets = 1000 },
      { id = 1, direction = 'forward', role = 'receiver', side = 'server', bits_per_second = 0.99e7,
        lost_packets = 10 * i, unique_packets = 1000 - 10 * i, jitter_ms = 0.2 * i, lost_pct = i } },
      sum = { sender = { bits_per_second = 1e7 }, receiver = { bits_per_second = 0.99e7, lost_packets = 10 * i,
        unique_packets = 1000 - 10 * i, jitter_ms = 0.2 * i, lost_pct = i } } }
  end
  return { proto = 'udp', host = '10.0.0.2', duration_s = 3, intervals = ivs,
    received = { lost_packets = 60, unique_packets = 2940, packets = 3000 } }
end

describe('qoslab.plot.timeseries', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it('TCP with a probe: throughput, RTT with the probe, cwnd and retransmits, sharing the time axis', function()
    local f = assert(plot.timeseries(tcp_result(true), { out = dir .. '/t.png', title = 'a TCP test' }))
    assert.same({ 'throughput', 'rtt', 'cwnd', 'retransmits' }, f.panels)
    assert_png(f.png, 1000, 900)
    assert.is_nil(f.svg)
    local gp = assert(slurp(f.gp))
    assert.matches("set multiplot title 'a TCP test'", gp, 1, true)
    assert.matches("title 'stream 1 (received)'", gp, 1, true)
    assert.matches("title 'SUM'", gp, 1, true)
    assert.matches("title 'stream 3: TCP RTT (TCP_INFO)'", gp, 1, true)
    assert.matches('probe RTT p50 (udp every 10 ms)', gp, 1, true)
    assert.matches("probe RTT p50 idle: 0.5 ms", gp, 1, true)
    assert.matches('probe requests lost (1 in all)', gp, 1, true)
    assert.matches('retransmitted: 7 in all', gp, 1, true)
    -- the warm-up interval is shaded; only the last panel labels the time axis
    assert.matches('set object rect from 0, graph 0 to 0.5, graph 1', gp, 1, true)
    local _, nx = gp:gsub("set xlabel 'time since the test started %(s%)'", '')
    assert.equal(1, nx)
    -- the data: 4 rows, RTT in ms (the probe's p99 reaches 7 ms), cwnd in KiB
    local dat = assert(slurp(f.dat))
    assert.matches('# columns: 1 start_s, 2 end_s, 3 mid_s, 4 stream 1 Mbit/s', dat, 1, true)
    local rows = 0
    for _ in dat:gmatch('\n[%d.]+ [%d.]+ [%d.]+ ') do rows = rows + 1 end
    assert.equal(4, rows)
    assert.matches('stream 1 tcp rtt ms', dat, 1, true)
    -- RTTs within 50x of each other: a linear axis from 0
    assert.matches("# panel 2: rtt\n[^\n]*\n[^\n]*\nset ylabel \"RTT\\012\\050ms\\051\" offset %-0.8,0\nunset logscale y\n", gp)
  end)

  it('RTTs more than 50x apart (a loopback probe beside a queueing TCP) get a log axis', function()
    local res = tcp_result(true)
    for _, iv in ipairs(res.intervals) do iv.latency.rtt_ms = dist(0.01, 0.02) end
    local f = assert(plot.timeseries(res, { out = dir .. '/log.png' }))
    local gp = assert(slurp(f.gp))
    assert.matches('# panel 2: rtt\n[^\n]*\n[^\n]*\n[^\n]*log\\051" offset[^\n]*\nset logscale y\n', gp)
    -- the other panels stay linear
    assert.matches('# panel 3: cwnd\n[^\n]*\n[^\n]*\n[^\n]*\nunset logscale y\n', gp)
    assert_png(f.png, 1000, 900)
  end)

  it('without a probe there is no probe in the RTT panel; UDP has loss and jitter, no cwnd', function()
    local t = assert(plot.timeseries(tcp_result(false), { out = dir .. '/np.png' }))
    assert.same({ 'throughput', 'rtt', 'cwnd', 'retransmits' }, t.panels)
    assert.is_nil(slurp(t.gp):find('probe', 1, true))
    local u = assert(plot.timeseries(udp_result(), { out = dir .. '/u' }))
    assert.same({ 'throughput', 'loss', 'jitter' }, u.panels)
    assert_png(u.png, 1000, 600)
    assert.is_string(u.svg)
    local gp = assert(slurp(u.gp))
    assert.matches("set multiplot title 'UDP test to 10.0.0.2: 1 stream, 3 s'", gp, 1, true)
    assert.matches('datagrams lost: 60 of 3000 in all', gp, 1, true)
    assert.is_nil(gp:find('cwnd', 1, true))
    assert.is_nil(gp:find('SUM', 1, true)) -- one stream: no SUM line
    -- jitter below 1 ms is drawn in µs
    assert.matches("set ylabel \"jitter\\012\\050\\302\\265s\\051\"", gp, 1, true)
  end)

  it('the title counts the streams of a reverse test and of each direction of a bidirectional one', function()
    -- A reverse test's streams are all "reverse": the title said "0 streams"
    -- where the text summary says "1 stream".
    local rev = udp_result()
    rev.reverse = true
    for _, iv in ipairs(rev.intervals) do
      for _, e in ipairs(iv.streams) do e.direction = 'reverse' end
    end
    local f = assert(plot.timeseries(rev, { out = dir .. '/rev.png' }))
    assert.matches("set multiplot title 'UDP test to 10.0.0.2: 1 stream, reverse, 3 s'", slurp(f.gp), 1, true)
    -- bidirectional: each direction counted
    local bi = tcp_result(false)
    bi.bidir = true
    for _, iv in ipairs(bi.intervals) do
      local n = #iv.streams
      for k = 1, n do
        local e = {}
        for key, v in pairs(iv.streams[k]) do e[key] = v end
        e.direction = 'reverse'
        iv.streams[#iv.streams + 1] = e
      end
    end
    f = assert(plot.timeseries(bi, { out = dir .. '/bi.png' }))
    assert.matches("set multiplot title 'TCP test to 127.0.0.1:5201: 2 streams each way, bidirectional, 2 s",
      slurp(f.gp), 1, true)
    for _, iv in ipairs(bi.intervals) do table.remove(iv.streams) table.remove(iv.streams) end
    f = assert(plot.timeseries(bi, { out = dir .. '/bi1.png' }))
    assert.matches("set multiplot title 'TCP test to 127.0.0.1:5201: 2 forward + 1 reverse stream, bidirectional",
      slurp(f.gp), 1, true)
    assert_png(f.png, 1000, 600)
  end)

  it('past MAX_STREAM_LINES streams: thin lines of one colour, one legend entry, the SUM kept', function()
    -- With -P 32 each panel's legend ran out of room (cut mid-word, the SUM
    -- without an entry) and the 8 colours repeated.
    local res = tcp_result(false)
    for _, iv in ipairs(res.intervals) do
      for id = 5, 23, 2 do
        iv.streams[#iv.streams + 1] = { id = id, direction = 'forward', role = 'sender', side = 'client',
          bits_per_second = 1e8, rtt_us = 900, snd_cwnd_bytes = 65536, retransmits = 0 }
        iv.streams[#iv.streams + 1] = { id = id, direction = 'forward', role = 'receiver', side = 'server',
          bits_per_second = 0.9e8 }
      end
    end
    assert.equal(8, require('qoslab.plot.timeseries').MAX_STREAM_LINES)
    local f = assert(plot.timeseries(res, { out = dir .. '/many.png' }))
    assert_png(f.png, 1000, 900)
    local gp = assert(slurp(f.gp))
    assert.matches("set multiplot title 'TCP test to 127.0.0.1:5201: 12 streams, 2 s", gp, 1, true)
    assert.matches("title '12 streams (received), a line each'", gp, 1, true)
    assert.matches("title '12 streams: TCP_INFO RTT, a line each'", gp, 1, true)
    assert.matches("title '12 streams, a line each'", gp, 1, true)
    assert.matches("title 'SUM'", gp, 1, true)
    assert.is_nil(gp:find("title 'stream 5", 1, true))
    local n = 0
    for _ in gp:gmatch("with lines lw 1 lc rgb '#8fb3d9' notitle") do n = n + 1 end
    assert.equal(3 * 11, n)
    -- 2 streams (tcp_result): their own colours and entries as before
    gp = assert(slurp(assert(plot.timeseries(tcp_result(false), { out = dir .. '/two.png' })).gp))
    assert.matches("title 'stream 3 (received)'", gp, 1, true)
    assert.is_nil(gp:find('a line each', 1, true))
  end)

  it('the retransmits legend counts as the totals do: the warm-up apart', function()
    -- With -O 1 the legend's "in all" counted the warm-up's retransmits
    -- too, where the summary's totals leave the warm-up out.
    local res = tcp_result(false)
    res.intervals[1].sum.sender.retransmits = 12  -- interval 1 is the warm-up
    local f = assert(plot.timeseries(res, { out = dir .. '/rtx.png' }))
    assert.matches("title 'retransmitted: 7 in all after the warm-up (12 in it)'", slurp(f.gp), 1, true)
  end)

  it("an unknown option is raised at the caller's line, not the library's", function()
    -- It pointed at lua/qoslab/plot/timeseries.lua, where check.keys is called.
    local ok, err = pcall(function() plot.timeseries(tcp_result(false), { out = dir .. '/k.png', colour = 'red' }) end)
    assert.is_false(ok)
    assert.matches('^[^:]*plot_timeseries_spec%.lua:%d+: qoslab%.plot%.timeseries: opts%.colour: unknown key', err)
    ok, err = pcall(function() plot.latency_cdf(tcp_result(true), { out = dir .. '/k.png', colour = 'red' }) end)
    assert.is_false(ok)
    assert.matches('^[^:]*plot_timeseries_spec%.lua:%d+: qoslab%.plot%.latency_cdf: opts%.colour', err)
    ok, err = pcall(function() plot.lines { out = dir .. '/k', series = {}, colour = 'red' } end)
    assert.is_false(ok)
    assert.matches('^[^:]*plot_timeseries_spec%.lua:%d+: qoslab%.plot%.lines: opts%.colour', err)
  end)

  it('rejects a result without intervals and bad options, naming the field', function()
    assert.has_error(function() plot.timeseries({ intervals = {} }, { out = dir .. '/x.png' }) end,
      'qoslab.plot.timeseries: res.intervals: expected a non-empty list of intervals, got table')
    assert.has_error(function() plot.timeseries(tcp_result(), { out = dir .. '/x.png', colour = 1 }) end)
    assert.has_error(function() plot.timeseries(tcp_result()) end)
  end)
end)

describe('qoslab.plot.latency_cdf', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it('idle beside loaded, from the histograms, exact at the bucket edges', function()
    local res = tcp_result(true)
    local f = assert(plot.latency_cdf(res, { out = dir .. '/c.png' }))
    assert_png(f.png, 800, 500)
    assert.equal(2, #f.curves)
    assert.matches('^loaded %(during the load%): 6 samples, p50 3 ms, p99 6 ms', f.curves[1])
    assert.matches('^idle %(before and after the load%): 4 samples', f.curves[2])
    local gp = assert(slurp(f.gp))
    assert.matches('set logscale x', gp, 1, true)
    local dat = assert(slurp(f.dat))
    -- loaded: from (min, 0) through the edges to (max, 1); 1 of 6 below the 2nd edge
    local block = dat:match('# rtt_ms fraction_below\n(.-)\n\n')
    local pts = {}
    for x, y in block:gmatch('([%d.e+-]+) ([%d.e+-]+)') do pts[#pts + 1] = { tonumber(x), tonumber(y) } end
    assert.same({ 1.5, 0 }, pts[1])
    assert.near(10 ^ 3.5 / 1000, pts[2][1], 1e-9)
    assert.near(1 / 6, pts[2][2], 1e-9)
    assert.same({ 7.2, 1 }, { pts[#pts][1], pts[#pts][2] })
    for i = 2, #pts do assert.is_true(pts[i][1] > pts[i - 1][1] and pts[i][2] >= pts[i - 1][2]) end
  end)

  it('an RTT range narrower than a decade gets numbers on its axis and a curve through the exact quantiles', function()
    -- A 20 ms link: every sample in one or two buckets (19.95-25.12-31.62
    -- ms). The log axis 15.4-40.6 ms held no power of ten, so no tic at all,
    -- and the curve was a straight line from 20 to 25 ms, far from the
    -- exact p50 the probe reports.
    local res = { proto = 'udp', host = '10.0.0.2', latency = { proto = 'udp', interval_ms = 10, samples = 440,
      rtt_ms = { min = 20.46, mean = 28, p50 = 28.3, p90 = 30.1, p99 = 31.0, p999 = 31.2, max = 31.24 },
      histogram = hist(43, { 1, 439 }),
      idle = { samples = 410, lost = 0, late = 0, histogram = hist(43, { 409, 1 }),
        rtt_ms = { min = 20.07, mean = 20.2, p50 = 20.2, p90 = 20.4, p99 = 20.7, p999 = 25.0, max = 25.6 } } } }
    local f = assert(plot.latency_cdf(res, { out = dir .. '/link.png' }))
    assert_png(f.png, 800, 500)
    local gp = assert(slurp(f.gp))
    assert.matches("\nset xtics ('20' 20, '25' 25, '30' 30, '40' 40)\n", gp, 1, true)
    local dat = assert(slurp(f.dat))
    local loaded, idle = dat:match('# rtt_ms fraction_below\n(.-)\n\n.-# rtt_ms fraction_below\n(.-)\n\n')
    assert.equal('20.46 0\n25.11886432 0.002272727273\n28.3 0.5\n30.1 0.9\n31 0.99\n31.2 0.999\n31.24 1', loaded)
    -- p999 25.0 ms would put 99.9 % below 25.0 ms where the counts put only
    -- 409 of 410 (99.76 %) below 25.12 ms: contradicted, left out
    assert.equal('20.07 0\n20.2 0.5\n20.4 0.9\n20.7 0.99\n25.11886432 0.9975609756\n25.6 1', idle)
  end)

  it('a list of results, labelled; no samples is EINVAL', function()
    local f = assert(plot.latency_cdf({ tcp_result(true), tcp_result(true) },
      { out = dir .. '/two.svg', labels = { 'before', 'after' } }))
    assert.equal(4, #f.curves)
    assert.matches('^after, idle', f.curves[4])
    assert.is_string(f.svg)
    -- one label too few was filled in as "test 2"; now it is an error
    assert.has_error(function()
      plot.latency_cdf({ tcp_result(true), tcp_result(true) }, { out = dir .. '/l.png', labels = { 'only one' } })
    end, 'qoslab.plot.latency_cdf: opts.labels: expected one label per result (2 results), got 1')
    local r, msg, code = plot.latency_cdf(tcp_result(false), { out = dir .. '/none.png' })
    assert.is_nil(r)
    assert.equal('EINVAL', code)
    assert.matches('no probe samples', msg, 1, true)
  end)

  it('test_plots: FILE.png and FILE-cdf.png when a probe ran, the time series alone otherwise', function()
    local r = assert(plot.test_plots(tcp_result(true), { out = dir .. '/run.png' }))
    assert.equal(dir .. '/run.png', r.timeseries.png)
    assert.equal(dir .. '/run-cdf.png', r.cdf.png)
    assert_png(r.cdf.png, 800, 500)
    local n = assert(plot.test_plots(udp_result(), { out = dir .. '/u.png' }))
    assert.is_nil(n.cdf)
    assert.is_nil(slurp(dir .. '/u-cdf.png'))
    assert.has_error(function() plot.test_plots(udp_result(), { out = dir .. '/u' }) end,
      'qoslab.plot.test_plots: opts.out: expected a path ending in .png or .svg, got string "' .. dir .. '/u"')
  end)
end)

-- plot.timeseries(res, {out = '/nonexist/dir/x.png'}) made /nonexist/dir,
-- and out = '/tmp/x.jpg' wrote x.jpg.png, x.jpg.svg, .dat and .gp, while
-- its error text said "a path (with .png or .svg, or without extension)"
-- and `qoslab client --plot FILE` refused both (ENOENT before the test; "does
-- not end in .png or .svg"). One rule now (qoslab.plot.gnuplot's
-- picture_path, which the CLI calls too): a missing folder is nil,
-- message, "ENOENT" with nothing written or made, in every plot function;
-- an extension other than .png or .svg raises naming opts.out.
describe('qoslab.plot output paths, as qoslab client --plot', function()
  local HERE = debug.getinfo(1, 'S').short_src
  local gnuplot = require 'qoslab.plot.gnuplot'
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)
  local function raises(f, expected)
    local line = debug.getinfo(2, 'l').currentline
    local ok, err = pcall(f)
    assert.is_false(ok, 'expected an error: ' .. expected)
    assert.equal(HERE .. ':' .. line .. ': ' .. expected, tostring(err))
  end
  local function files_in(d)
    local p = assert(io.popen("ls -A '" .. d .. "'"))
    local s = p:read('a')
    p:close()
    return s
  end

  it('a folder that does not exist: nil, message, ENOENT, nothing made', function()
    local missing = dir .. '/no/such'
    local function enoent(f, name)
      local r, msg, code = f()
      assert.is_nil(r, name)
      assert.equal('ENOENT', code, name)
      assert.equal('cannot write ' .. missing .. '/x.dat: No such file or directory (plots make no folder: make '
        .. missing .. ' first, e.g. with qoslab.fs.mkdir_p)', msg, name)
    end
    enoent(function() return plot.timeseries(tcp_result(true), { out = missing .. '/x.png' }) end, 'timeseries')
    enoent(function() return plot.latency_cdf(tcp_result(true), { out = missing .. '/x.svg' }) end, 'latency_cdf')
    enoent(function() return plot.test_plots(tcp_result(true), { out = missing .. '/x.png' }) end, 'test_plots')
    enoent(function()
      return plot.lines { out = missing .. '/x', series = { { title = 's', points = { { 1, 2 } } } } }
    end, 'lines')
    enoent(function()
      return plot.heatmap { out = missing .. '/x', xs = { 1, 2 }, ys = { 1 }, z = { { 5, 6 } } }
    end, 'heatmap')
    assert.equal('', files_in(dir))
  end)

  it('an extension other than .png or .svg raises naming opts.out', function()
    raises(function() local f = plot.timeseries(tcp_result(), { out = dir .. '/x.jpg' }) return f end,
      'qoslab.plot.timeseries: opts.out: expected a path (with .png or .svg, or without extension), got string "'
      .. dir .. '/x.jpg"')
    raises(function() local f = plot.latency_cdf(tcp_result(true), { out = dir .. '/x.PNG' }) return f end,
      'qoslab.plot.latency_cdf: opts.out: expected a path (with .png or .svg, or without extension), got string "'
      .. dir .. '/x.PNG"')
    raises(function() local f = plot.timeseries(tcp_result(), { out = dir .. '/' }) return f end,
      'qoslab.plot.timeseries: opts.out: expected a path (with .png or .svg, or without extension), got string "'
      .. dir .. '/"')
    raises(function() local f = plot.test_plots(tcp_result(), { out = dir .. '/x.jpg' }) return f end,
      'qoslab.plot.test_plots: opts.out: expected a path ending in .png or .svg, got string "' .. dir .. '/x.jpg"')
    -- the functions that add the extensions themselves refuse .png and .svg
    -- (x.png.png), and take any other dot as part of the name
    raises(function() local f = plot.lines { out = dir .. '/x.png', series = {} } return f end,
      'qoslab.plot.lines: opts.out: expected a path without extension, got string "' .. dir .. '/x.png"')
    raises(function() local f = plot.timeseries(tcp_result(), { out = dir .. '/x.png', size = { 10, 10 } }) return f end,
      'qoslab.plot.timeseries: opts.size[1]: expected an integer in [300, 10000], got 10')
    assert.equal('', files_in(dir))
    -- a dot in a name is no extension unless a word follows it
    local f = assert(plot.timeseries(tcp_result(), { out = dir .. '/loss_0.5', formats = { 'png' } }))
    assert.equal(dir .. '/loss_0.5.png', f.png)
    local l = assert(plot.lines { out = dir .. '/tcp.cubic', formats = { 'svg' },
      series = { { title = 's', points = { { 1, 2 }, { 2, 3 } } } } })
    assert.equal(dir .. '/tcp.cubic.svg', l.svg)
  end)

  it('one rule for the CLI and the library', function()
    local cases = {
      { 'x.png', 'x', 'png' }, { 'd/x.svg', 'd/x', 'svg' }, { 'd.v1/x', 'd.v1/x' }, { 'loss_0.5', 'loss_0.5' },
      { 'x.jpg' }, { 'x.PNG' }, { 'x.v2' }, { 'd/' }, { 'd/..' }, { '' },
    }
    for _, c in ipairs(cases) do
      local base, ext = gnuplot.picture_path(c[1])
      assert.equal(c[2], base, c[1])
      assert.equal(c[3], ext, c[1])
    end
    assert.is_nil(gnuplot.picture_path(5))
  end)
end)
