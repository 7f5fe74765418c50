-- qoslab.testbed with real netem (runs inside the VM guest): the impairment
-- sits under the tbf or htb shaper and reads back there, a ping between the
-- namespaces shows the configured delay (+-5 % or 0.2 ms, the larger),
-- `tb:impair` changes it between runs and removes it without cutting the
-- link, `reverse_impair` delays the server's egress, a rate change keeps the
-- netem, and closing leaves no namespace, link or state record behind.
local cjson = require 'cjson'
local netem = require 'qoslab.netem'
local shape = require 'qoslab.shape'
local state = require 'qoslab.state'
local testbed = require 'qoslab.testbed'

local function sh(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1'))
  local out = p:read('a')
  p:close()
  return out
end

local function snapshot()
  return { netns = sh('ip netns list'), links = sh("ip -o link show | awk '{print $2}'") }
end

-- The child qdisc under the shaper, as tc sees it.
local function child(ns, ifname, parent)
  for _, q in ipairs(cjson.decode(sh('tc -n ' .. ns .. ' -j qdisc show dev ' .. ifname))) do
    if q.parent == parent then return q end
  end
  return nil
end

-- Minimum RTT in ms of `count` pings from the client to the server. The
-- minimum leaves out the first ping (it waits for ARP, whose reply may be
-- delayed too) and the emulator's scheduling noise.
local function rtt_ms(tb, count)
  local out = sh(string.format('ip netns exec %s ping -n -q -c %d -i 0.05 -W 3 %s',
    tb.client_netns, count or 8, tb.server_addr))
  return assert(tonumber(out:match('= ([%d%.]+)/')), out)
end

local function near_delay(got_ms, base_ms, want_ms)
  local added = got_ms - base_ms
  assert(math.abs(added - want_ms) <= math.max(0.05 * want_ms, 0.2),
    string.format('round trip added %.3f ms for %g ms of delay (base %.3f, with %.3f)',
      added, want_ms, base_ms, got_ms))
end

local RATE = 100000000

for _, kind in ipairs { 'tbf', 'htb' } do
  local parent = kind == 'tbf' and '1:1' or '1:10'
  local default_child = kind == 'tbf' and 'bfifo' or 'pfifo'

  describe('qoslab.testbed with netem under ' .. kind .. ' #netem', function()
    local before, tb
    setup(function() before = snapshot() end)
    teardown(function()
      if tb then tb:close() end
      assert.same(before, snapshot())
      assert.is_nil(io.open(state._file()))
    end)

    it('builds the testbed, reads limit and impairment back under the shaper', function()
      tb = assert(testbed { rate_bps = RATE, shape = kind,
        impair = { delay_ms = 100, limit_packets = 'auto' } })
      local g = assert(tb:get())
      assert.equal(kind, g.client.shape.kind)
      assert.equal(RATE, g.client.shape.rate_bps)
      assert.equal(RATE, g.server.shape.rate_bps)
      -- "auto" sizes netem's queue for the shaper's rate: 100 Mbit/s x 100 ms
      assert.same({ delay_ms = 100, limit_packets = math.ceil(RATE / 8 * 0.1 / 1514 * 1.5) },
        g.client.impair)
      assert.is_nil(g.server.impair)
      local q = assert(child(tb.client_netns, tb.client_ifname, parent))
      assert.equal('netem', q.kind)
      assert.equal(0.1, q.options.delay.delay)
      -- the kernel's own default child of a new shaper is not dumped
      assert.is_nil(child(tb.server_netns, tb.server_ifname, parent))
    end)

    it('delays the round trip, changes between runs, and removes the delay', function()
      local with100 = rtt_ms(tb)
      -- Removing netem puts the shaper's fifo back: the link still carries.
      assert.is_true(tb:impair(nil))
      assert.equal(default_child, child(tb.client_netns, tb.client_ifname, parent).kind)
      assert.is_nil(tb:get().client.impair)
      local base = rtt_ms(tb)
      assert.is_true(base < 20, 'base rtt ' .. base)
      near_delay(with100, base, 100)
      assert.is_true(tb:impair({ delay_ms = 30 }))
      assert.same({ delay_ms = 30, limit_packets = 1000 }, tb:get().client.impair)
      near_delay(rtt_ms(tb), base, 30)
      -- A rate change keeps the netem under the shaper (tbf: in place).
      assert(shape.apply(tb.client_ifname, { kind = kind, rate_bps = RATE // 2 }, { netns = tb.client_netns }))
      assert.equal(RATE // 2, tb:get().client.shape.rate_bps)
      assert.same({ delay_ms = 30, limit_packets = 1000 }, tb:get().client.impair)
      near_delay(rtt_ms(tb), base, 30)
      -- The reverse path: netem on the server's egress under its shaper.
      assert.is_true(tb:impair({ delay_ms = 20 }, 'reverse'))
      assert.same({ delay_ms = 20, limit_packets = 1000 }, tb:get().server.impair)
      assert.equal('netem', child(tb.server_netns, tb.server_ifname, parent).kind)
      near_delay(rtt_ms(tb), base, 50)
      assert.is_true(tb:impair(nil))
      assert.is_true(tb:impair({}, 'reverse'))
      assert.equal(default_child, child(tb.server_netns, tb.server_ifname, parent).kind)
      local g = tb:get()
      assert.is_nil(g.client.impair)
      assert.is_nil(g.server.impair)
      assert.is_true(rtt_ms(tb) < base + 2)
    end)

    it('netem at the shaper parent replaces the default fifo without a warning', function()
      local r = assert(netem.apply(tb.client_ifname, { delay_ms = 1 },
        { netns = tb.client_netns, parent = parent }))
      assert.same({}, r.warnings)
      assert.is_true(tb:impair(nil))
      assert.is_true(tb:close())
      tb = nil
    end)
  end)
end

describe('qoslab.testbed backend "auto" on a kernel with sch_netem #netem', function()
  it('takes kernel netem, and limit_packets = "auto" as netem sizes it', function()
    local tb = assert(testbed { rate_bps = RATE, impair = { delay_ms = 10, limit_packets = 'auto' } })
    finally(function() tb:close() end)
    assert.is_true(testbed.kernel_has_netem())
    assert.equal('netem', tb.backend)
    assert.equal('netem', tb:get().client.impair and child(tb.client_netns, tb.client_ifname, '1:1').kind)
  end)
end)

describe('qoslab.testbed built with reverse_impair, no shaper #netem', function()
  it('delays both directions at the root and removes everything', function()
    local before = snapshot()
    do
      local tb <close> = assert(testbed { impair = { delay_ms = 40 }, reverse_impair = { delay_ms = 15 } })
      local g = assert(tb:get())
      assert.is_nil(g.client.shape)
      assert.same({ delay_ms = 40, limit_packets = 1000 }, g.client.impair)
      assert.same({ delay_ms = 15, limit_packets = 1000 }, g.server.impair)
      local both = rtt_ms(tb)
      assert.is_true(tb:impair(nil))
      assert.is_true(tb:impair(nil, 'reverse'))
      assert.is_nil(netem.get(tb.client_ifname, { netns = tb.client_netns }))
      near_delay(both, rtt_ms(tb), 55)
    end
    assert.same(before, snapshot())
  end)
end)

describe('bin/qoslab run examples/testbed_delay.lua #netem', function()
  it('prints limit and delay read back, a ping shows the delay, nothing is left', function()
    local before = snapshot()
    local out = sh('lua5.4 bin/qoslab run examples/testbed_delay.lua; echo "exit $?"')
    assert.matches('\nexit 0\n$', out)
    assert.matches(': tbf 100000000 bit/s, netem delay 100 ms\n', out, 1, true)
    -- the base round trip in the guest is well under a millisecond
    local min = assert(tonumber(out:match('rtt min/avg/max/mdev = ([%d%.]+)/')), out)
    assert(min >= 100 and min <= 105, 'min rtt ' .. min)
    assert.same(before, snapshot())
  end)
end)
