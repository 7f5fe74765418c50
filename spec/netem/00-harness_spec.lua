-- The guest that `make check-netem` boots really has netem and the other
-- qdiscs, classifiers, actions and links qoslab uses. Runs inside the guest
-- (lua/qoslab/vm/run-in-vm.sh); on a host without sch_netem it fails at the
-- first `tc ... netem`, which is the point.
local cjson = require 'cjson'

-- Run a shell command; return ok (exit 0), combined output.
local function sh(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1', 'r'))
  local out = p:read('a')
  local ok = p:close()
  return ok == true, out
end

local function must(cmd)
  local ok, out = sh(cmd)
  assert(ok, cmd .. ' failed: ' .. out)
  return out
end

local function pid()
  local f = assert(io.open('/proc/self/stat', 'r'))
  local s = f:read('l')
  f:close()
  return tonumber(s:match('^(%d+)'))
end

describe('guest harness', function()
  it('runs in the qoslab guest (run-in-vm.sh sets QOSLAB_IN_VM)', function()
    assert.are.equal('1', os.getenv('QOSLAB_IN_VM'))
  end)

  describe('netem on lo', function()
    after_each(function()
      sh('tc qdisc del dev lo root')
      -- Nothing of ours may remain: lo is back to its default qdisc.
      assert.is_nil(must('tc qdisc show dev lo'):find('netem', 1, true))
    end)

    it('adds netem delay 10ms and the kernel reports it back', function()
      must('tc qdisc add dev lo root netem delay 10ms')
      local q = cjson.decode(must('tc -j qdisc show dev lo'))
      assert.are.equal(1, #q)
      assert.are.equal('netem', q[1].kind)
      assert.is_true(q[1].root)
      assert.are.equal(0.01, q[1].options.delay.delay)
      assert.are.equal(1000, q[1].options.limit)
    end)

    it('delays a ping round trip on lo by 2 x 10 ms', function()
      must('tc qdisc add dev lo root netem delay 10ms')
      -- lo: the echo and the reply both leave through the netem root.
      local out = must('ping -n -c 20 -i 0.05 -W 2 127.0.0.1')
      local rtts = {}
      for ms in out:gmatch('time=([%d.]+) ms') do rtts[#rtts + 1] = tonumber(ms) end
      assert.are.equal(20, #rtts, out)
      table.sort(rtts)
      local median = (rtts[10] + rtts[11]) / 2
      -- netem never delivers early; emulation adds 0.3-1 ms per round trip
      -- (measured when the harness was built), so allow 3 ms on the minimum and 5 ms on the median.
      assert.is_true(rtts[1] >= 20.0, 'min RTT ' .. rtts[1] .. ' ms < 20 ms')
      assert.is_true(rtts[1] <= 23.0, 'min RTT ' .. rtts[1] .. ' ms > 23 ms')
      assert.is_true(median <= 25.0, 'median RTT ' .. median .. ' ms > 25 ms')
    end)

    it('without netem the same ping is fast (the delay came from netem)', function()
      local out = must('ping -n -c 5 -i 0.05 -W 2 127.0.0.1')
      local min = assert(tonumber(out:match('= ([%d.]+)/')), out)
      assert.is_true(min < 5.0, 'min RTT without netem ' .. min .. ' ms')
    end)
  end)

  it('qoslab.vm.host_has_netem() says true here (the probe sees netem where it exists)', function()
    local vm = require 'qoslab.vm'
    assert.are.same({ true }, { vm.host_has_netem() })
    assert.is_nil(must('ip netns list'):find('qoslab-probe', 1, true))
    -- and no guest inside the guest
    local ok, msg, code = vm.available()
    assert.is_nil(ok)
    assert.are.equal('ENOTSUP', code)
    assert.is_truthy(msg:find('already inside the qoslab guest', 1, true), msg)
  end)

  describe('modules qoslab needs', function()
    local ns = 'qoslab-vmh-' .. pid()
    -- ip -n / tc -n: cheaper than `ip netns exec` (no mount namespace per
    -- command), which matters under emulation.
    local ipn, tcn = 'ip -n ' .. ns .. ' ', 'tc -n ' .. ns .. ' '
    after_each(function()
      sh('ip netns del ' .. ns)
      assert.is_nil(must('ip netns list'):find(ns, 1, true))
    end)

    it('veth, ifb, tbf, htb + netem child, ingress, u32 and mirred work in a netns', function()
      must('ip netns add ' .. ns)
      must(ipn .. 'link add qa type veth peer name qb')
      must(ipn .. 'link add qi type ifb')
      for _, d in ipairs { 'qa', 'qb', 'qi' } do must(ipn .. 'link set ' .. d .. ' up') end
      must(tcn .. 'qdisc add dev qa root tbf rate 1gbit burst 128kb latency 50ms')
      must(tcn .. 'qdisc add dev qb root handle 1: htb default 10')
      must(tcn .. 'class add dev qb parent 1: classid 1:10 htb rate 100mbit')
      must(tcn .. 'qdisc add dev qb parent 1:10 handle 10: netem delay 5ms')
      must(tcn .. 'qdisc add dev qa handle ffff: ingress')
      must(tcn .. 'filter add dev qa parent ffff: protocol all u32 match u32 0 0 '
        .. 'action mirred egress redirect dev qi')
      local kinds = {}
      for _, d in ipairs { 'qa', 'qb' } do
        for _, q in ipairs(cjson.decode(must(tcn .. '-j qdisc show dev ' .. d))) do
          kinds[q.kind] = true
        end
      end
      assert.are.same({ tbf = true, htb = true, netem = true, ingress = true }, kinds)
      local f = must(tcn .. 'filter show dev qa parent ffff:')
      assert.is_truthy(f:find('mirred', 1, true), f)
      assert.is_truthy(f:find('qi', 1, true), f)
    end)
  end)
end)
