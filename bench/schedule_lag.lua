-- Impairment schedules: the lag of each change (actual − planned on the
-- CLOCK_MONOTONIC grid) while a TCP test runs through the testbed. Steps
-- every 100 ms alternate the forward delay between 10 and 20 ms; the lag of
-- a change is until the link took the spec (backend "link") or the kernel
-- acknowledged the netem replace (backend "netem").
--
--   bin/qoslab run [--host|--guest] bench/schedule_lag.lua [-- duration_s [backend]]
--                                      (default 10 s, the testbed's default backend)
--
-- Needs root. The testbed's namespaces are made and removed here.
local testbed = require 'qoslab.testbed'
local traffic = require 'qoslab.traffic'

local args = { ... }
local dur = math.tointeger(tonumber(args[1] or '10'))
local backend = args[2]
assert(dur and dur >= 2, 'usage: schedule_lag.lua [duration_s >= 2 [link|netem]]')

local tb <close> = assert(testbed { backend = backend, impair = { delay_ms = 10 } })
local srv <close> = assert(traffic.server { netns = tb.server_netns, port = 0 })
local steps = {}
for i = 0, (dur - 1) * 10 - 1 do
  steps[#steps + 1] = { at_s = 0.5 + i * 0.1, delay_ms = i % 2 == 0 and 20 or 10 }
end
local sched <close> = assert(tb:schedule(steps))
local res = assert(traffic.run { host = tb.server_addr, port = srv:port(), netns = tb.client_netns,
  duration_s = dur })
sched:wait(2)
sched:attach(res)
local lags = {}
for _, c in ipairs(res.impairment_changes) do
  assert(c.ok, c.message)
  lags[#lags + 1] = c.lag_ms
end
table.sort(lags)
local L = res.impairment_lag_ms
print(string.format('%s: %d changes in a %d s TCP test (%.0f Mbit/s): lag mean %.3f ms, p50 %.3f, '
  .. 'p99 %.3f, max %.3f ms', tb.backend, L.n, dur, res.received.bits_per_second / 1e6, L.mean_ms,
  lags[math.max(1, math.ceil(#lags * 0.5))], lags[math.max(1, math.ceil(#lags * 0.99))], L.max_ms))
