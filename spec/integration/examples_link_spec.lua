-- Every example and the demo, in their quick form, natively through
-- qoslab's own impairment link (`--backend link`: on this host's kernel,
-- which has no sch_netem, that is also what auto takes). Each must exit 0,
-- leave its results, CSV and PNG, name the link in every record, leave no
-- namespace behind, and measure at the rates of a real CPU, inside what the
-- path allows: TCP at 1 ms on a 1 Gbit/s testbed above 100 Mbit/s (the qemu
-- guest's emulated CPU, which these examples used to need here, gave 405
-- at 50 ms) and never above the link's rate; goodput falling with delay and
-- rising with the window; UDP received at its offered bitrate; four streams
-- taking more than one. The same examples run with kernel netem in the
-- guest (spec/netem/plan_examples_spec.lua).
local H = require 'integration.traffic_helper'
local plan = require 'qoslab.plan'

local q, netns_count = H.q, H.netns_count

local LINK_BPS = 1e9

-- Run `bin/qoslab ARGS` in a fresh folder; the records of its results.jsonl
-- by sweep name and params, the folder's file names, and the output.
local function run(defer, args)
  local p = assert(io.popen('mktemp -d /tmp/qoslab-examples-link.XXXXXX'))
  local dir = p:read('l')
  p:close()
  defer(function() os.execute('rm -rf ' .. q(dir)) end)
  local before = netns_count()
  p = assert(io.popen('env -u QOSLAB_BUILD lua5.4 bin/qoslab ' .. args .. ' --backend link --quick --out '
    .. q(dir) .. ' 2>&1; echo "rc=$?"'))
  local out = p:read('a')
  p:close()
  assert.equal('0', out:match('rc=(%d+)%s*$'), out)
  assert.equal(before, netns_count(), 'a namespace was left behind')
  local recs = assert(plan.load(dir .. '/results.jsonl'))
  assert.is_true(#recs > 0, out)
  for _, r in ipairs(recs) do
    assert.equal('link', r.backend, out)
    assert.equal('host', r.where, out)
  end
  p = assert(io.popen('ls ' .. q(dir)))
  local files = p:read('a')
  p:close()
  assert.matches('%.csv', files)
  assert.matches('%.png', files)
  return recs, out
end

-- The received bit rate of the record whose params match `want`.
local function bps(recs, want)
  for _, r in ipairs(recs) do
    local ok = true
    for k, v in pairs(want) do if r.params[k] ~= v then ok = false end end
    if ok then return assert(r.results[1].received.bits_per_second) end
  end
  error('no record with these params')
end

local function within_link(recs)
  for _, r in ipairs(recs) do
    for _, res in ipairs(r.results) do
      assert.is_true(res.received.bits_per_second <= LINK_BPS * 1.01,
        string.format('%.1f Mbit/s through a %g Mbit/s link', res.received.bits_per_second / 1e6, LINK_BPS / 1e6))
    end
  end
end

describe('examples and the demo on the native link (quick form)', function()
  it('delay_sweep: above 100 Mbit/s at 1 ms, less at 100 ms', function()
    local defer = H.cleanups(finally)
    local recs = run(defer, 'run examples/delay_sweep.lua')
    within_link(recs)
    local near, far = bps(recs, { delay_ms = 1 }), bps(recs, { delay_ms = 100 })
    assert.is_true(near > 100e6, string.format('%.1f Mbit/s at 1 ms', near / 1e6))
    assert.is_true(far < near, string.format('%.1f Mbit/s at 100 ms, %.1f at 1 ms', far / 1e6, near / 1e6))
  end)

  it('loss_delay_matrix: every cell measured, under the link rate', function()
    local defer = H.cleanups(finally)
    local recs = run(defer, 'run examples/loss_delay_matrix.lua')
    within_link(recs)
    for _, loss in ipairs { 1, 5 } do
      local near = bps(recs, { loss_pct = loss, delay_ms = 50 })
      assert.is_true(near > 0, 'no goodput at 50 ms, ' .. loss .. ' %')
    end
  end)

  it('window_sweep: a 4 MiB buffer takes more than 256 KiB at 300 ms', function()
    local defer = H.cleanups(finally)
    local recs = run(defer, 'run examples/window_sweep.lua')
    within_link(recs)
    for _, mode in ipairs { 'sndbuf', 'sndbuf+rcvbuf' } do
      local small = bps(recs, { mode = mode, window_bytes = 256 * 1024 })
      local large = bps(recs, { mode = mode, window_bytes = 4 * 1024 * 1024 })
      assert.is_true(large > small, string.format('%s: %.1f Mbit/s at 4 MiB, %.1f at 256 KiB', mode,
        large / 1e6, small / 1e6))
    end
  end)

  it('parallel_clients: four streams take more than one', function()
    local defer = H.cleanups(finally)
    local recs = run(defer, 'run examples/parallel_clients.lua')
    within_link(recs)
    local one, four = bps(recs, { clients = 1 }), bps(recs, { clients = 4 })
    assert.is_true(four > 1.5 * one, string.format('%.1f Mbit/s with 4, %.1f with 1', four / 1e6, one / 1e6))
  end)

  it('udp_bitrate: received at the offered 10 and 100 Mbit/s', function()
    local defer = H.cleanups(finally)
    local recs = run(defer, 'run examples/udp_bitrate.lua')
    for _, offered in ipairs { 10e6, 100e6 } do
      local got = bps(recs, { bitrate_bps = offered })
      assert.is_true(got > 0.8 * offered and got < 1.01 * offered,
        string.format('%.2f Mbit/s received of %g offered', got / 1e6, offered / 1e6))
    end
  end)

  it('demo --quick: the delay sweep, the matrix and the window sweep through the link', function()
    local defer = H.cleanups(finally)
    local recs, out = run(defer, 'demo')
    assert.matches('backend link', out, 1, true)
    within_link(recs)
    local near = bps(recs, { delay_ms = 1 })
    assert.is_true(near > 100e6, string.format('%.1f Mbit/s at 1 ms', near / 1e6))
  end)
end)
