-- netem over ssh against a real sch_netem (in the guest): qoslab.host
-- applies it on host A's data veth (a namespace with its own sshd, see
-- spec/integration/host_ssh_helper.lua), reads it back, sees it in tc and in
-- the round trip of a ping across the data path, clears it, and its
-- cleanup removes one it left.
local H = require 'spec.integration.traffic_helper'
local S = require 'spec.integration.host_ssh_helper'
local qoslab = require 'qoslab'

local usable, why = S.available()

describe('qoslab.host netem over ssh #netem', function()
  if not usable then
    pending('skipped: ' .. why)
    return
  end

  it('applies, reads, clears and cleans up netem on a host over ssh, seen by tc and ping', function()
    local defer = H.cleanups(finally)
    local env = S.setup(2, 1)
    defer(function() env.close() end)
    local A, B = env.hosts[1], env.hosts[2]
    local a = qoslab.host(env.spec(1, { timeout_s = 120, connect_timeout_s = 30 }))
    defer(function() a:close() end)
    local function tc() return H.must('ip netns exec ' .. A.ns .. ' tc qdisc show dev data0') end
    local function rtt_ms()
      local out = H.must(string.format('ip netns exec %s ping -n -q -c 3 -i 0.2 %s', A.ns, B.data_addr))
      return tonumber(out:match('= [%d.]+/([%d.]+)/'))
    end
    do
      local r = assert(a:netem_apply('data0', { delay_ms = 40 }))
      assert.equal(40, r.spec.delay_ms)
      assert.same(r.spec, assert(a:netem_get('data0')))
      assert.matches('qdisc netem %S+ root .*delay 40ms', tc())
      local ms = rtt_ms()
      assert(ms >= 40 and ms < 40 + 200, 'rtt ' .. tostring(ms) .. ' ms through 40 ms of netem')
      local st = assert(a:netem_stats('data0'))
      assert.equal('table', type(st))
      assert.is_true(a:netem_clear('data0'))
      assert.is_nil(a:netem_get('data0'))
      assert.not_matches('netem', tc())
      assert.is_false(a:netem_clear('data0'))
      -- Words too; left in place for cleanup to remove.
      assert(a:netem_apply('data0', 'delay 30ms loss 1%'))
      assert.matches('delay 30ms', tc())
      assert.same({ { kind = 'netem', ifname = 'data0', removed = true } }, a:cleanup())
      assert.not_matches('netem', tc())
    end
  end)
end)
