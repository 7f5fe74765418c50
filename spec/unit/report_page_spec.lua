-- The report page of a results folder (qoslab.report.page, `qoslab report`),
-- the comparison of folders (qoslab.report.compare) and the metadata they
-- show (qoslab.meta): every inserted string escaped, the last record of a
-- point shown, labels from what differs, and in headless Chromium every
-- image of the page of `qoslab run examples/delay_sweep.lua` loads (the
-- testbed and engine are spec/support/fake_testbed.lua's, so no root and no
-- netem are needed; the real testbed is spec/integration/report_meta_spec.lua).
local html = require 'qoslab.report.html'
local page = require 'qoslab.report.page'
local compare = require 'qoslab.report.compare'
local meta = require 'qoslab.meta'
local plan = require 'qoslab.plan'
local plot = require 'qoslab.plot'

local function tmpdir()
  local p = assert(io.popen('mktemp -d /tmp/qoslab-page-spec.XXXXXX'))
  local d = p:read('l')
  p:close()
  return d
end

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function slurp(path)
  local f = io.open(path, 'rb')
  if not f then return nil end
  local s = f:read('a')
  f:close()
  return s
end

local function write(path, text)
  local f = assert(io.open(path, 'w'))
  f:write(text)
  f:close()
end

local FAKE_INIT = "package.path = './spec/?.lua;' .. package.path; require('support.fake_testbed').install()"

local function qoslab(dir, args, env)
  local cmd = string.format('%s lua5.4 bin/qoslab %s >%s 2>%s; echo $?', env or '', args,
    q(dir .. '/stdout'), q(dir .. '/stderr'))
  local p = assert(io.popen(cmd))
  local rc = tonumber(p:read('l'))
  p:close()
  return rc, slurp(dir .. '/stdout') or '', slurp(dir .. '/stderr') or ''
end

local CHROMIUM = '/usr/bin/chromium'
local function have_chromium()
  local f = io.open(CHROMIUM, 'r')
  if f then f:close() return true end
  return false
end

-- Chromium headless on a file: URL; returns what it printed on stdout.
local function chromium(dir, args, url)
  local profile = dir .. '/chromium-profile'
  os.execute('mkdir -p ' .. q(profile))
  local cmd = string.format('timeout 120 %s --headless --no-sandbox --disable-gpu '
    .. '--disable-background-networking --disable-component-update --disable-sync --no-first-run '
    .. '--user-data-dir=%s %s %s 2>%s', CHROMIUM, q(profile), args, q(url), q(dir .. '/chromium.log'))
  local p = assert(io.popen(cmd))
  local out = p:read('a')
  p:close()
  os.execute('rm -rf ' .. q(profile))
  return out
end

-- The counts the page's own script sets on <body> once the page has loaded.
local function loaded_images(dir, path)
  local dom = chromium(dir, '--virtual-time-budget=10000 --dump-dom', 'file://' .. path)
  local total = dom:match('<body[^>]-data%-images="(%d+)"')
  local ok = dom:match('<body[^>]-data%-images%-loaded="(%d+)"')
  return tonumber(total), tonumber(ok), dom
end

local function count_png(dir)
  local p = assert(io.popen('find ' .. q(dir) .. ' -name "*.png" | wc -l'))
  local n = tonumber(p:read('l'))
  p:close()
  return n
end

-- A folder with records of one sweep (a point recorded twice: an error,
-- then the resumed run's value) and hostile names and values.
local function hostile_folder(dir)
  local s = plan.sweep { name = 'd <script>alert(1)</script>', progress = false, out = dir,
    params = { delay_ms = { 1, 10 } }, run = function(p) return 1e8 / p.delay_ms end }
  assert.equal(2, #s.points)
  -- The point delay_ms=10 once more, as a resumed run records it.
  local lines = {}
  for l in io.lines(dir .. '/results.jsonl') do lines[#lines + 1] = l end
  local rec = require('cjson').decode(lines[2])
  rec.summary.mean, rec.summary.min, rec.summary.max, rec.summary.values = 42e6, 42e6, 42e6, { 42e6 }
  rec.run_id = 'second'
  write(dir .. '/results.jsonl', lines[1] .. '\n' .. lines[2] .. '\n' .. plan.encode(rec) .. '\n')
  assert(meta.write(dir, { qoslab_version = 'v<1>', kernel = { release = '6.1 "x"' }, hostname = "h'&",
    cpu = { model = 'CPU <b>', count = 2 }, backend = 'host',
    sysctls = { ['net.ipv4.tcp_congestion_control'] = '<i>cubic</i>' },
    interfaces = { { ifname = 'lo', kind = '', mtu_bytes = 65536, offloads = { tso = true, gso = true, gro = false },
                     qdiscs = { { kind = 'noqueue', handle = 'none', parent = 'root' } } } },
    paths = {} }))
  assert(plot.lines { out = dir .. '/p<q>"r', title = "T <&> 'x'", formats = { 'png' },
    series = { { title = 's', points = { { 1, 1 }, { 10, 2 } } } } })
end

describe('qoslab.report.html', function()
  it('escape turns the five markup characters into entities and drops control bytes', function()
    assert.equal('&lt;a href=&quot;x&quot;&gt;&amp;&#39;', html.escape('<a href="x">&\''))
    assert.equal('ab\tc\nd', html.escape('a\0b\tc\n\27d'))
    assert.equal('', html.escape(nil))
    assert.equal('\\xFF ok', html.escape('\255 ok'))
  end)

  it('href percent-encodes each segment and keeps the path relative', function()
    assert.equal('a%20b/c%22d%3C.png', html.href('a b/c"d<.png'))
    assert.equal('a%3Ab.png', html.href('a:b.png'))
    assert.equal('../x/index.html', html.href('../x/index.html'))
  end)
end)

describe('qoslab.report.page', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute('rm -rf ' .. q(dir)) end)

  it('escapes every string it puts in the page and shows the last record of a point', function()
    hostile_folder(dir)
    local path = assert(page.write(dir))
    assert.equal(dir .. '/index.html', path)
    local text = slurp(path)
    assert.is_nil(text:find('<script>alert', 1, true))
    assert.is_nil(text:find('<b>', 1, true))
    assert.is_nil(text:find('<i>cubic', 1, true))
    assert.matches('d &lt;script&gt;alert(1)&lt;/script&gt;', text, 1, true)
    assert.matches('v&lt;1&gt;', text, 1, true)
    assert.matches('6.1 &quot;x&quot;', text, 1, true)
    assert.matches('h&#39;&amp;', text, 1, true)
    assert.matches('&lt;i&gt;cubic&lt;/i&gt;', text, 1, true)
    -- The plot: its gnuplot title as caption, its odd name encoded in the link.
    assert.matches('<img src="p%3Cq%3E%22r.png"', text, 1, true)
    assert.matches('<strong>T &lt;&amp;&gt; &#39;x&#39;</strong>', text, 1, true)
    -- delay_ms = 10: 42 Mbit/s (the second record), once; 1 ms: 100 Mbit/s.
    assert.matches('<td class="n">10</td><td class="n">42</td>', text, 1, true)
    assert.is_nil(text:find('<td class="n">10</td><td class="n">10</td>', 1, true))
    assert.matches('<td class="n">100</td>', text, 1, true)
    assert.matches('tso on, gso on, gro off', text, 1, true)
    -- Every link is relative: no scheme, no absolute path.
    for link in text:gmatch('href="([^"]*)"') do assert.is_nil(link:match('^%a+:'), link) end
    for link in text:gmatch('src="([^"]*)"') do
      assert.is_nil(link:match('^/'), link)
      assert.is_nil(link:match('^%a+:'), link)
    end
  end)

  it('sweeps keeps each sweep apart, in file order, and the last record of each point', function()
    local recs = {
      { sweep = 'b', index = 2, params = { x = 2 }, order = { 'x' }, summary = { mean = 1 } },
      { sweep = 'a', index = 1, params = { x = 1 }, order = { 'x' }, summary = { mean = 5 } },
      { sweep = 'b', index = 1, params = { x = 1 }, order = { 'x' }, error = 'boom' },
      { sweep = 'b', index = 1, params = { x = 1 }, order = { 'x' }, summary = { mean = 3 } },
    }
    local s = page.sweeps(recs)
    assert.equal(2, #s)
    assert.equal('b', s[1].name)
    assert.equal(2, #s[1].points)
    assert.equal(1, s[1].points[1].params.x)
    assert.equal(3, s[1].points[1].summary.mean)
    assert.is_nil(s[1].points[1].error)
  end)

  it('records of the wrong shape are shown without what is wrong, never raise', function()
    write(dir .. '/results.jsonl', table.concat({
      '{"sweep":"x","index":1,"params":{"a":1},"order":[1,"zz","a"],"summary":{"mean":"NaN","n":"two"}}',
      '{"sweep":{"t":1},"params":{"b":"s"},"order":"b","summary":"none","results":5,"error":{"e":1}}',
      '{"sweep":"x","index":"2","params":{"a":2,"c":{}},"summary":{"mean":2e6,"min":2e6,"max":2e6,"n":1}}',
    }, '\n') .. '\n')
    local text = assert(page.render(dir))
    assert.matches('<td class="n">2</td><td class="n">2</td><td class="n">1</td>', text, 1, true)
    assert.matches('<h3>table: ', text, 1, true)
  end)

  it('a folder without meta.json or records still gets a page that says so', function()
    -- A run that recorded nothing yet: only its mark.
    write(dir .. '/qoslab-run.json', '{"plan":"p"}')
    local text = assert(page.render(dir))
    assert.matches('No sweep recorded in this folder', text, 1, true)
    assert.matches('No plot (PNG) in this folder', text, 1, true)
    assert.matches('no meta.json and no records', text, 1, true)
    local none, msg, code = page.render(dir .. '/missing')
    assert.is_nil(none)
    assert.equal('ENOENT', code)
    assert.matches('missing', msg, 1, true)
  end)
end)

describe('qoslab.report.page: what it reads of a folder', function()
  -- The page used to be written into any folder (`qoslab report /etc`
  -- wrote /etc/index.html listing the whole tree) and to follow symbolic
  -- links out of it: a link to /etc listed its files, `evil.png` -> a file
  -- outside was embedded as an image.
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute('rm -rf ' .. q(dir)) end)

  it('refuses a folder that is not a results folder and never writes into it', function()
    os.execute('mkdir -p ' .. q(dir .. '/etc/sub'))
    write(dir .. '/etc/passwd', 'root:x:0:0\n')
    write(dir .. '/etc/sub/x.conf', 'x\n')
    local none, msg, code = page.write(dir .. '/etc')
    assert.is_nil(none)
    assert.equal('ENOENT', code)
    assert.equal('not a results folder: ' .. dir .. '/etc (no results.jsonl, meta.json nor qoslab-run.json in it): '
      .. 'give the folder `qoslab run` or `qoslab demo` wrote', msg)
    assert.is_nil(slurp(dir .. '/etc/index.html'))
    assert.is_nil(slurp(dir .. '/etc/index.html.tmp'))
    -- an empty folder, and one whose results.jsonl is a link, are not results folders either
    os.execute('mkdir ' .. q(dir .. '/empty') .. ' ' .. q(dir .. '/linked'))
    assert.equal('ENOENT', select(3, page.render(dir .. '/empty')))
    os.execute('ln -s ' .. q(dir .. '/etc/passwd') .. ' ' .. q(dir .. '/linked/results.jsonl'))
    assert.equal('ENOENT', select(3, page.render(dir .. '/linked')))
    -- a file is not a folder: ENOTDIR, not ENOENT
    none, msg, code = page.render(dir .. '/etc/passwd')
    assert.is_nil(none)
    assert.equal('ENOTDIR', code)
    assert.equal('not a folder: ' .. dir .. '/etc/passwd is a file', msg)
  end)

  it('lists and embeds only the regular files inside the folder, never through a link', function()
    local r = dir .. '/r'
    os.execute('mkdir -p ' .. q(r .. '/sub') .. ' ' .. q(dir .. '/outside'))
    write(r .. '/qoslab-run.json', '{"plan":"p"}')
    write(r .. '/a.csv', '1\n')
    write(r .. '/sub/b.csv', '2\n')
    write(dir .. '/outside/secret.csv', 'secret\n')
    write(dir .. '/outside/passwd', 'root:x:0:0\n')
    assert(plot.lines { out = r .. '/sub/p', title = 'a plot', formats = { 'png' },
      series = { { title = 's', points = { { 1, 1 }, { 2, 2 } } } } })
    for target, name in pairs { ['../outside'] = 'outdir', ['../outside/passwd'] = 'evil.png',
                                ['../outside/secret.csv'] = 'shadow.csv', ['..'] = 'up', ['.'] = 'self',
                                ['sub'] = 'sublink' } do
      os.execute('ln -s ' .. q(target) .. ' ' .. q(r .. '/' .. name))
    end
    local files, left = page.files(r)
    assert.same({ 'a.csv', 'qoslab-run.json', 'sub/b.csv', 'sub/p.dat', 'sub/p.gp', 'sub/p.png' }, files)
    assert.same({ 'evil.png', 'outdir', 'self', 'shadow.csv', 'sublink', 'up' }, left.links)
    assert.same({}, left.deep)
    assert.is_false(left.cut)
    local text = assert(page.render(r))
    assert.matches('<img src="sub/p.png"', text, 1, true)
    assert.is_nil(text:find('evil.png"', 1, true))
    assert.is_nil(text:find('href="shadow.csv"', 1, true))
    assert.is_nil(text:find('secret', 1, true))
    assert.is_nil(text:find('outdir/', 1, true))
    assert.is_nil(text:find('self/', 1, true))
    assert.matches('6 symbolic links not followed (only files inside the folder are shown): '
      .. 'evil.png, outdir, self, shadow.csv, sublink, up', text, 1, true)
  end)

  it('looks LIMITS.depth levels down and lists at most LIMITS.files files, and says so', function()
    local r = dir .. '/r'
    os.execute('mkdir -p ' .. q(r .. '/a/b/c'))
    write(r .. '/qoslab-run.json', '{}')
    write(r .. '/a/1.csv', '')
    write(r .. '/a/b/2.csv', '')
    write(r .. '/a/b/c/3.csv', '')
    assert.equal(3, page.LIMITS.depth)
    local files, left = page.files(r)
    assert.same({ 'a/1.csv', 'a/b/2.csv', 'qoslab-run.json' }, files)
    assert.same({ 'a/b/c' }, left.deep)
    local keep = page.LIMITS.files
    page.LIMITS.files = 2
    local ok, err = pcall(function()
      local f2, l2 = page.files(r)
      assert.equal(2, #f2)
      assert.is_true(l2.cut)
      local text = assert(page.render(r))
      assert.matches('Only the first 2 files are shown.', text, 1, true)
      assert.matches('Folders deeper than 3 levels not shown: a/b/c', text, 1, true)
    end)
    page.LIMITS.files = keep
    assert(ok, err)
  end)
end)

describe('qoslab.report.compare', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute('rm -rf ' .. q(dir)) end)

  local function m(cc, extra)
    local t = { qoslab_version = 'scm-1', kernel = { release = '6.1' }, hostname = 'h', backend = 'host',
      cpu = { model = 'C', count = 2 }, sysctls = { ['net.ipv4.tcp_congestion_control'] = cc },
      paths = { { role = 'client', netns = 'qoslab-' .. math.random(1e6) .. '-c',
                  sysctls = { ['net.ipv4.tcp_congestion_control'] = cc },
                  interfaces = { { ifname = 'qc' .. math.random(1e6), mtu_bytes = 1500 } } } } }
    for k, v in pairs(extra or {}) do t[k] = v end
    return t
  end

  it('labels a folder by the setting that differs, once, never by per-run names', function()
    local labels, diffs = compare.labels({ m('reno'), m('cubic') }, { 'a', 'b' })
    assert.same({ 'tcp_congestion_control=reno', 'tcp_congestion_control=cubic' }, labels)
    -- Both the host's and the client's sysctl differ; the namespace and
    -- interface names (made per run) do not count.
    assert.equal(2, #diffs)
    assert.equal('sysctl net.ipv4.tcp_congestion_control', diffs[1].key)
    assert.equal('client sysctl net.ipv4.tcp_congestion_control', diffs[2].key)
  end)

  it('labels by kernel when that is what differs, by folder name when nothing does', function()
    local labels = compare.labels({ m('cubic', { kernel = { release = '6.1' } }),
                                    m('cubic', { kernel = { release = '6.12' } }) }, { 'a', 'b' })
    assert.same({ 'kernel=6.1', 'kernel=6.12' }, labels)
    labels = compare.labels({ m('cubic'), m('cubic') }, { 'before', 'after' })
    assert.same({ 'before', 'after' }, labels)
    labels = compare.labels({ m('cubic'), m('cubic') }, { 'x', 'x' })
    assert.same({ 'x', 'x #2' }, labels)
  end)

  it('overlays the same sweep from each folder in one plot and tables them side by side', function()
    local a, b = dir .. '/before', dir .. '/after'
    for i, d in ipairs { a, b } do
      plan.sweep { name = 'delay <sweep>', progress = false, out = d, params = { delay_ms = { 1, 10, 100 } },
        run = function(p) return 1e9 / p.delay_ms / i end }
      assert(meta.write(d, m(i == 1 and 'reno' or 'cubic')))
    end
    local res = assert(compare.write({ a, b }, { out = dir .. '/cmp' }))
    assert.same({ 'delay <sweep>' }, res.sweeps)
    local text = slurp(res.path)
    assert.matches('<img src="01-delay-sweep.png"', text, 1, true)
    assert.matches('href="../before/index.html"', text, 1, true)
    assert.matches('tcp_congestion_control=reno (Mbit/s)', text, 1, true)
    assert.matches('<td class="n">1000</td><td class="n">500</td>', text, 1, true)
    local gp = slurp(dir .. '/cmp/01-delay-sweep.gp')
    assert.matches("title 'tcp_congestion_control=reno'", gp, 1, true)
    assert.matches("title 'tcp_congestion_control=cubic'", gp, 1, true)
    assert.equal('\137PNG', slurp(dir .. '/cmp/01-delay-sweep.png'):sub(1, 4))
    -- throughput over a decade or more: a log y axis, as the sweep's own plot
    -- (it was linear below a 100x spread: 0-900 Mbit/s for a quick delay sweep)
    local c, e = dir .. '/c', dir .. '/e'
    for i, d in ipairs { c, e } do
      -- 909 down to 45 Mbit/s: a 20x spread
      plan.sweep { name = 'mid', progress = false, out = d, params = { delay_ms = { 1, 10, 100 } },
        run = function(p) return 1e9 / (1 + p.delay_ms / 10) / i end }
      -- 952 down to 333 Mbit/s: under a decade, linear
      plan.sweep { name = 'narrow', progress = false, out = d, params = { delay_ms = { 1, 10 } },
        run = function(p) return 1e9 / (1 + p.delay_ms / 20) / i end }
    end
    assert(compare.write({ c, e }, { out = dir .. '/cmp2' }))
    assert.matches('\nset logscale y\n', slurp(dir .. '/cmp2/01-mid.gp'), 1, true)
    assert.is_nil(slurp(dir .. '/cmp2/02-narrow.gp'):find('set logscale y', 1, true))
  end)

  it('a folder that is not a results folder, or has no results.jsonl, is an error', function()
    -- It used to be a warning on a page written anyway, with exit status 0.
    local a, b, c = dir .. '/a', dir .. '/b', dir .. '/c'
    plan.sweep { name = 's', progress = false, out = a, params = { delay_ms = { 1, 10 } }, run = function() return 1 end }
    os.execute('mkdir -p ' .. q(b) .. ' ' .. q(c))
    local none, msg, code = compare.write({ a, b }, { out = dir .. '/cmp' })
    assert.is_nil(none)
    assert.equal('ENOENT', code)
    assert.matches('not a results folder: ' .. b, msg, 1, true)
    assert(meta.write(c, m('cubic')))
    none, msg, code = compare.write({ a, c }, { out = dir .. '/cmp' })
    assert.is_nil(none)
    assert.equal('ENOENT', code)
    assert.equal('no results.jsonl in ' .. c .. ': nothing of it to compare', msg)
    assert.is_nil(slurp(dir .. '/cmp/index.html'))
    none, msg, code = compare.write({ a, a .. '/results.jsonl' }, { out = dir .. '/cmp' })
    assert.is_nil(none)
    assert.equal('ENOTDIR', code)
    assert.equal('not a folder: ' .. a .. '/results.jsonl is a file', msg)
  end)

  it('a folder that is missing: nil, message, ENOENT; fewer than two: raises', function()
    local none, msg, code = compare.write({ dir, dir .. '/nope' }, { out = dir .. '/c' })
    assert.is_nil(none)
    assert.equal('ENOENT', code)
    assert.matches('nope', msg, 1, true)
    assert.has_error(function() compare.write({ dir }, { out = dir .. '/c' }) end,
      'qoslab.report.compare.write: dirs: expected two or more results folders, got 1')
  end)
end)

describe('qoslab.meta', function()
  it('collect reads this machine: version, kernel, CPU, sysctls, loopback', function()
    local r = meta.collect { ifnames = { 'lo' }, backend = 'host' }
    assert.equal(require('qoslab.core')._VERSION, r.qoslab_version)
    assert.equal((slurp('/proc/sys/kernel/osrelease'):gsub('%s+$', '')), r.kernel.release)
    assert.is_true(r.cpu.count >= 1)
    assert.equal((slurp('/proc/sys/net/ipv4/tcp_congestion_control'):gsub('%s+$', '')),
      r.sysctls['net.ipv4.tcp_congestion_control'])
    assert.matches('^%d+ %d+ %d+$', r.sysctls['net.ipv4.tcp_rmem'])
    assert.equal('host', r.backend)
    assert.equal('lo', r.interfaces[1].ifname)
    assert.is_table(r.interfaces[1].qdiscs)
    assert.is_boolean(r.interfaces[1].offloads.gro)
  end)

  it('an interface that is not there is recorded with its error, not raised', function()
    local r = meta.collect { ifnames = { 'qoslabnone0' } }
    assert.matches('ENODEV', r.interfaces[1].error, 1, true)
  end)

  it('bad options raise naming the field', function()
    assert.has_error(function() meta.collect { ifname = 'lo' } end)
    assert.has_error(function() meta.collect { ifnames = { 1 } } end,
      'qoslab.meta.collect: opts.ifnames[1]: expected an interface name, got 1')
  end)

  it('write_run writes meta.json once; a resumed run keeps the first', function()
    local dir = tmpdir()
    finally(function() os.execute('rm -rf ' .. q(dir)) end)
    assert.is_true(meta.write_run(dir, { backend = 'host', testbeds = {} }))
    local first = slurp(dir .. '/meta.json')
    assert.is_false(meta.write_run(dir, { backend = 'guest', testbeds = {} }))
    assert.equal(first, slurp(dir .. '/meta.json'))
    assert.equal('host', meta.read(dir).backend)
    assert.same({}, meta.read(dir).paths)
  end)
end)

describe('qoslab report (CLI) and the page in headless Chromium', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute('rm -rf ' .. q(dir)) end)

  it('bad arguments: exit 2; a folder that is missing: exit 1 with the reason', function()
    local rc, _, err = qoslab(dir, 'report')
    assert.equal(2, rc)
    assert.matches('Usage:', err, 1, true)
    rc, _, err = qoslab(dir, 'report ' .. q(dir) .. " --out ''")
    assert.equal(2, rc)
    assert.matches('--out: expected a folder path', err, 1, true)
    rc, _, err = qoslab(dir, 'report ' .. q(dir .. '/none'))
    assert.equal(1, rc)
    assert.matches('not a folder: ' .. dir .. '/none (ENOENT)', err, 1, true)
    -- a file, and a folder that holds no results: exit 1, nothing written
    write(dir .. '/f', 'x')
    rc, _, err = qoslab(dir, 'report ' .. q(dir .. '/f'))
    assert.equal(1, rc)
    assert.matches('not a folder: ' .. dir .. '/f is a file (ENOTDIR)', err, 1, true)
    os.execute('mkdir ' .. q(dir .. '/other'))
    rc, _, err = qoslab(dir, 'report ' .. q(dir .. '/other'))
    assert.equal(1, rc)
    assert.matches('not a results folder: ' .. dir .. '/other', err, 1, true)
    assert.is_nil(slurp(dir .. '/other/index.html'))
  end)

  it('the page of a run that failed says so, with the error; counts take their plural only past one', function()
    -- The page of a sweep that raised at its 2nd point looked like a
    -- finished one-point sweep ("1 records in results.jsonl").
    write(dir .. '/fail.lua', "local plan = require 'qoslab.plan'\n"
      .. "plan.sweep { name = 'fail', params = { x = { 1, 2, 3 } }, run = function(p)\n"
      .. "  if p.x == 2 then error('boom at point 2') end\n  return p.x * 1e6 end }\n")
    local rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/fail.lua') .. ' --host --out ' .. q(dir .. '/run'))
    assert.equal(1, rc, err)
    local mark_text = assert(slurp(dir .. '/run/qoslab-run.json'))
    local mark = require('cjson').decode(mark_text)
    assert.equal('fail', mark.plan)
    assert.equal(1, mark.exit_status)
    assert.matches('boom at point 2', mark.error, 1, true)
    local text = assert(slurp(dir .. '/run/index.html'))
    assert.matches('<p class="bad">The run failed (exit status 1): ' .. dir .. '/fail.lua:3: boom at point 2.', text, 1, true)
    assert.matches('plan <code>fail</code>, 1 record in results.jsonl</p>', text, 1, true)
    -- a run that ends well says nothing of the kind
    write(dir .. '/ok.lua', "require('qoslab.plan').sweep { name = 'ok', params = { x = { 1 } }, run = function() return 1 end }\n")
    rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/ok.lua') .. ' --host --out ' .. q(dir .. '/ok'))
    assert.equal(0, rc, err)
    mark_text = assert(slurp(dir .. '/ok/qoslab-run.json'))
    assert.equal(0, require('cjson').decode(mark_text).exit_status)
    assert.is_nil(assert(slurp(dir .. '/ok/index.html')):find('The run failed', 1, true))
    -- one line that does not parse
    local lines = assert(slurp(dir .. '/run/results.jsonl'))
    write(dir .. '/run/results.jsonl', lines .. '{not json\n')
    text = assert(page.render(dir .. '/run'))
    assert.matches('1 line that does not parse', text, 1, true)
  end)

  it('qoslab report DIR --out OUT: the page of one folder written elsewhere, linking back to its files', function()
    -- A folder on a read-only mount could get no page anywhere: --out was
    -- refused for one folder.
    local r = dir .. '/run'
    hostile_folder(r)
    local rc, out, err = qoslab(dir, 'report ' .. q(r) .. ' --out ' .. q(dir .. '/pages/run'))
    assert.equal(0, rc, err)
    assert.equal('qoslab report: wrote ' .. dir .. '/pages/run/index.html\n', out)
    assert.is_nil(slurp(r .. '/index.html'))
    local text = assert(slurp(dir .. '/pages/run/index.html'))
    assert.matches('<img src="../../run/p%3Cq%3E%22r.png"', text, 1, true)
    assert.matches('<a href="../../run/results.jsonl">results.jsonl</a>', text, 1, true)
    -- the folder must still be a results folder
    os.execute('mkdir ' .. q(dir .. '/other'))
    rc, out, err = qoslab(dir, 'report ' .. q(dir .. '/other') .. ' --out ' .. q(dir .. '/pages/other'))
    assert.equal(1, rc)
    assert.matches('not a results folder', err, 1, true)
    assert.equal('', out)
    assert.is_nil(slurp(dir .. '/pages/other/index.html'))
  end)

  it('qoslab run examples/delay_sweep.lua writes meta.json and index.html; every image loads', function()
    local o = dir .. '/delay'
    local rc, _, err = qoslab(dir, 'run examples/delay_sweep.lua --host --quick --out ' .. q(o),
      'LUA_INIT_5_4=' .. q(FAKE_INIT))
    assert.equal(0, rc, err)
    assert.matches('qoslab run: report ' .. o .. '/index.html', err, 1, true)
    local m = assert(meta.read(o))
    assert.equal('host', m.where)
    assert.is_string(m.sysctls['net.ipv4.tcp_congestion_control'])
    -- Records keep their own fields.
    local recs = assert(plan.load(o .. '/results.jsonl'))
    assert.equal(m.kernel.release, recs[1].kernel)
    assert.equal(m.qoslab_version, recs[1].qoslab_version)
    os.remove(o .. '/index.html')
    local out
    rc, out, err = qoslab(dir, 'report ' .. q(o))
    assert.equal(0, rc, err)
    assert.equal('qoslab report: wrote ' .. o .. '/index.html\n', out)
    local text = slurp(o .. '/index.html')
    assert.matches('<img src="delay_sweep.png"', text, 1, true)
    assert.matches('TCP throughput vs one-way delay (1 Gbit/s link, loss 0)', text, 1, true)
    if not have_chromium() then
      pending('chromium is not installed (make deps installs it): the images were not loaded in a browser')
      return
    end
    local total, ok, dom = loaded_images(dir, o .. '/index.html')
    assert.equal(count_png(o), total, dom)
    assert.is_true(total >= 1)
    assert.equal(total, ok, dom)
    chromium(dir, '--window-size=1200,2400 --screenshot=' .. q(dir .. '/page.png'), 'file://' .. o .. '/index.html')
    assert.equal('\137PNG', (slurp(dir .. '/page.png') or ''):sub(1, 4))
    -- The check can fail: a plot gone after the page was written is counted
    -- as not loaded, and the page says so.
    os.remove(o .. '/delay_sweep.png')
    total, ok, dom = loaded_images(dir, o .. '/index.html')
    assert.equal(1, total)
    assert.equal(0, ok)
    assert.matches('image did not load: delay_sweep.png', dom, 1, true)
  end)

  it('a plan that writes nothing to its folder gets no page and no meta.json', function()
    write(dir .. '/p.lua', 'print("hello")')
    local rc, out, err = qoslab(dir, 'run ' .. q(dir .. '/p.lua') .. ' --out ' .. q(dir .. '/o'))
    assert.equal(0, rc, err)
    assert.equal('hello\n', out)
    assert.is_nil(err:find('report', 1, true), err)
    assert.is_nil(slurp(dir .. '/o/index.html'))
    assert.is_nil(slurp(dir .. '/o/meta.json'))
  end)

  it('qoslab report DIR1 DIR2 --out: the comparison page, every image loads', function()
    for _, n in ipairs { 'a', 'b' } do
      local rc, _, err = qoslab(dir, 'run examples/delay_sweep.lua --host --quick --out ' .. q(dir .. '/' .. n),
        'LUA_INIT_5_4=' .. q(FAKE_INIT))
      assert.equal(0, rc, err)
    end
    local rc, out, err = qoslab(dir, 'report ' .. q(dir .. '/a') .. ' ' .. q(dir .. '/b') .. ' --out ' .. q(dir .. '/c'))
    assert.equal(0, rc, err)
    assert.equal('qoslab report: wrote ' .. dir .. '/c/index.html\n', out)
    local text = slurp(dir .. '/c/index.html')
    -- Same machine, same settings: labelled by folder name.
    assert.matches("The folders' metadata are the same", text:gsub('&#39;', "'"), 1, true)
    assert.matches("title 'a'", slurp(dir .. '/c/01-delay-sweep.gp'), 1, true)
    if not have_chromium() then
      pending('chromium is not installed (make deps installs it): the images were not loaded in a browser')
      return
    end
    local total, ok, dom = loaded_images(dir, dir .. '/c/index.html')
    assert.equal(1, total, dom)
    assert.equal(1, ok, dom)
  end)
end)
