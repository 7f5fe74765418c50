-- A client and a server namespace joined by a veth pair rate-limited to
-- 100 Mbit/s (tbf on both ends' egress); reads the limit back from the kernel
-- and removes everything at the end of the block.   bin/qoslab run examples/testbed_rate.lua
local tb <close> = assert(require('qoslab').testbed { rate_bps = 100000000 })
local c = tb:get().client
print(string.format('%s -> %s: %s %d bit/s', tb.client_addr, tb.server_addr, c.shape.kind, c.shape.rate_bps))
