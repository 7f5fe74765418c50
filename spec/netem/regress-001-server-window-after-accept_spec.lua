-- Regression 001: the server applied SO_RCVBUF/SO_SNDBUF to the ACCEPTED data
-- socket after the handshake. Linux had already fixed that socket's window
-- clamp from the default buffer (about 64 KiB), and the late SO_RCVBUF turned
-- off the autotuning that would have raised it. So the receive window never
-- opened: `window_bytes = 4 MiB` over 300 ms RTT gave 1.63 Mbit/s, while the
-- defaults gave 56.6 Mbit/s (guest, kernel 6.1). The host's 6.18
-- kernel re-derives the clamp from the buffer when the skb scaling ratio
-- changes. There the old code still reached rcv_ssthresh 7.5 MB (measured
-- with ss -ti), so the host hid the bug. The check needs netem and runs in
-- the guest:
--   lua/qoslab/vm/run-in-vm.sh 'cd <checkout> && busted --lua=lua5.4 spec/netem/regress-001-server-window-after-accept_spec.lua'
local core = require 'qoslab.core'
local traffic = require 'qoslab.traffic'
local H = require 'integration.traffic_helper'

local netem_available = H.netem_available

local describe_netem = (core.traffic_client and netem_available()) and describe
  or function(name)
    describe(name, function() pending('this kernel has no sch_netem (run in the guest)') end)
  end

describe_netem('regress 001: server window after accept', function()
  it('a 4 MiB window over 300 ms RTT opens on the server (forward: server receives)', function()
    local saved = { H.sysctl('net.core.rmem_max'), H.sysctl('net.core.wmem_max') }
    local tcp_mem = H.read('/proc/sys/net/ipv4/tcp_mem'):gsub('%s+', ' ')
    H.must('sysctl -qw net.core.rmem_max=67108864 net.core.wmem_max=67108864')
    -- above the 1 GiB guest's memory-pressure mark, which shrinks windows
    H.must("sysctl -qw net.ipv4.tcp_mem='65536 98304 131072'")
    local pair = H.netns_pair {}
    local srv
    local ok, err = pcall(function()
      for _, x in ipairs { { pair.a, pair.va }, { pair.b, pair.vb } } do
        H.must(string.format('tc -n %s qdisc replace dev %s root netem delay 150ms limit 100000',
          x[1], x[2]))
      end
      srv = assert(traffic.server { port = 5201, netns = pair.b })
      local res = assert(traffic.run { host = pair.b_addr, port = 5201, netns = pair.a,
        window_bytes = 4194304, omit_s = 5, duration_s = 2 })
      H.identities(res, 'regress 001')
      local bps = res.received.bits_per_second
      -- 4 MiB / 0.3 s = 112 Mbit/s; the bug gave 64 KiB / 0.3 s = 1.7 Mbit/s
      local per = {}
      for _, iv in ipairs(res.intervals) do
        local x = iv.sum.receiver or iv.sum.sender
        per[#per + 1] = x and string.format('%.0f', x.bits_per_second / 1e6) or '-'
      end
      assert(bps >= 0.5 * 4194304 * 8 / 0.3,
        string.format('%.1f Mbit/s: the server window did not open (intervals %s Mbit/s, '
          .. '%s retransmits, max cwnd %s B)', bps / 1e6, table.concat(per, ' '),
          tostring(res.sent.retransmits), tostring(res.streams[1].sender.max_snd_cwnd_bytes)))
      assert.equal(8388608, res.streams[1].receiver.rcvbuf.granted_bytes)
    end)
    if srv then srv:stop() end
    pair.close()
    H.must(string.format('sysctl -qw net.core.rmem_max=%d net.core.wmem_max=%d', saved[1], saved[2]))
    H.must(string.format("sysctl -qw net.ipv4.tcp_mem='%s'", tcp_mem))
    assert(ok, err)
  end)
end)
