-- examples/testbed_rate.lua plus 100 ms of netem delay on the client's egress
-- (under the shaper); reads limit and delay back and pings the server: the
-- round trip shows the delay. Kernel netem where the kernel has sch_netem,
-- else qoslab's native link (the testbed's backend "auto"; `--backend netem`
-- carries the script into the qemu guest instead).
local tb <close> = assert(require('qoslab').testbed { rate_bps = 100000000, impair = { delay_ms = 100 } })
local c = tb:get().client
print(string.format('%s -> %s: %s %d bit/s, %s delay %g ms', tb.client_addr, tb.server_addr,
  c.shape.kind, c.shape.rate_bps, tb.backend, c.impair.delay_ms))
local ping = io.popen('ip netns exec ' .. tb.client_netns .. ' ping -n -q -c 5 -i 0.2 ' .. tb.server_addr)
print(ping:read('a'):match('rtt [^\n]*'))
