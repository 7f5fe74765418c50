-- examples/two_hosts.lua with real netem (this suite runs in the qemu
-- guest): two "hosts" are namespaces with their own sshd, joined by a veth
-- data path; `qoslab run --host-map` puts netem on the client host's data
-- device over ssh and sweeps the delay (10 and 100 ms here: each point
-- costs some 25 s in the emulated guest). Against theory: the sender's RTT is
-- at least the one-way delay (netem holds every data packet that long; the
-- ACKs come back undelayed), and the throughput stays under the window over
-- the RTT (bytes in flight are at most the congestion window). Everything
-- is gone afterwards: no netem, no server, no ssh master.
local H = require 'spec.integration.traffic_helper'
local S = require 'spec.integration.host_ssh_helper'

describe('two hosts over ssh with kernel netem', function()
  local ok_env, why_not = S.available()
  if not ok_env then
    it('needs the ssh harness', function() pending(why_not) end)
    return
  end

  it('examples/two_hosts.lua --quick: RTT >= delay, throughput <= cwnd / RTT, nothing left', function()
    local env = S.setup(2)
    finally(function() env.close(); H.cleanup_tmp() end)
    local a, b = env.hosts[1], env.hosts[2]
    local dir = H.tmp('two-hosts')
    local flags = { '--ssh-identity', H.q(env.client_key), '--remote-qoslab', H.q(S.qoslab) }
    for _, o in ipairs(env.options) do flags[#flags + 1] = '--ssh-option ' .. H.q(o) end
    local log = H.tmp('two-hosts.log')
    H.sh(string.format('env -u QOSLAB_BUILD %s run examples/two_hosts.lua --quick --out %s --host-map client=%s '
      .. '--host-map server=%s %s -- dev=%s server_addr=%s delays_ms=10,100 >%s 2>&1; echo "rc=$?" >>%s', S.qoslab, H.q(dir), a.ssh,
      b.ssh, table.concat(flags, ' '), a.data_ifname, b.data_addr, H.q(log), H.q(log)))
    local out = H.read(log)
    print('\n' .. out)
    assert.equal('0', out:match('rc=(%d+)%s*$'), out)
    local recs = assert(require('qoslab.plan').load(dir .. '/results.jsonl'))
    assert.equal(2, #recs)
    for i, r in ipairs(recs) do
      local d = ({ 10, 100 })[i]
      assert.equal(d, r.params.delay_ms)
      local res = r.results[1]
      local snd = res.streams[1].sender
      assert(snd.min_rtt_us >= d * 1000, string.format('%d ms: min RTT %d us below the delay', d, snd.min_rtt_us))
      local bound = snd.max_snd_cwnd_bytes * 8 / (snd.min_rtt_us / 1e6)
      assert(res.received.bits_per_second <= bound * 1.1, string.format('%d ms: %.0f bit/s above cwnd/RTT %.0f',
        d, res.received.bits_per_second, bound))
      if d >= 50 then
        assert(res.received.bits_per_second <= snd.max_snd_cwnd_bytes * 8 / (d / 1000) * 1.1,
          string.format('%d ms: %.0f bit/s above cwnd / delay', d, res.received.bits_per_second))
      end
    end
    local meta = assert(require('qoslab.meta').read(dir))
    assert.equal(a.ssh, meta.hosts.client.connection)
    assert.equal(b.ssh, meta.hosts.server.connection)
    assert.matches('TCP throughput vs one-way delay', out, 1, true)
    assert.not_matches('netem', H.must(string.format('tc -n %s qdisc show dev %s', a.ns, a.data_ifname)))
    assert.same({}, env.procs(2, 'bin/qoslab'))
    assert.same({}, env.procs(1, 'bin/qoslab'))
    local masters = {}
    for p in require('lfs').dir('/proc') do
      local cmd = p:match('^%d+$') and (H.read('/proc/' .. p .. '/cmdline') or ''):gsub('%z', ' ') or ''
      if cmd:match('^ssh ') and (cmd:find(a.ssh, 1, true) or cmd:find(b.ssh, 1, true)) then masters[#masters + 1] = cmd end
    end
    assert.same({}, masters)
  end)
end)
