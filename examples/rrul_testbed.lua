-- rrul_testbed.lua: the rrul standard test and the latency test on a
-- 100 Mbit/s link (tbf, its default 20 ms queue) between two namespaces.
--
-- Shows: with no queue management, eight TCP streams queue in the shaper, so
-- the round trip under load grows by up to the queue's 20 ms (induced
-- latency); the four DSCP classes share the link about equally, since tbf
-- ignores the marks. The latency test alone gives the idle path.
--
-- Run:   bin/qoslab run examples/rrul_testbed.lua [--out DIR] [--quick]
-- Files: DIR/results.jsonl (one line per test run, every flow's result in it)
local qoslab = require 'qoslab'
local run = QOSLAB_RUN or {}
local quick = run.quick or os.getenv('QOSLAB_QUICK') == '1'

local tb <close> = assert(qoslab.testbed { rate_bps = 100e6 })
-- a server with its default limits: rrul is one test (4 streams each way)
local srv <close> = assert(qoslab.server { netns = tb.server_netns })

local common = { host = tb.server_addr, netns = tb.client_netns, print = true }
local function with(t)
  local o = {}
  for k, v in pairs(common) do o[k] = v end
  for k, v in pairs(t) do o[k] = v end
  return o
end

assert(qoslab.stdtest.run('latency', with { duration_s = quick and 2 or 10 }))
print()
assert(qoslab.stdtest.run('rrul', with { duration_s = quick and 3 or 30, idle_s = quick and 1 or 5 }))
