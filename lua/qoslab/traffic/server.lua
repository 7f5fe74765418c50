--- The handle of a running traffic server (`qoslab.server` returns one).
-- @classmod qoslab.traffic.server
local check = require 'qoslab.check'
local as_result = require('qoslab.traffic.result').as_result

local Server = { __name = 'qoslab.Server' }
Server.__index = Server

-- Call the binding's method `name` for a Server method: a call with '.'
-- instead of ':' (self not a qoslab.Server) and the binding's errors (a
-- closed server) are raised at the method's caller.
local function call(self, name, ...)
  if getmetatable(self) ~= Server then
    error(string.format('qoslab.Server:%s: expected a qoslab.Server as self (call it as srv:%s(...)), got %s',
      name, name, type(self)), 3)
  end
  local ud = self._ud
  local r = table.pack(pcall(ud[name], ud, ...))
  if not r[1] then error(r[2], 3) end
  return table.unpack(r, 2, r.n)
end

--- The listening port (useful with `port = 0`).
-- @treturn integer
-- @raise after `stop()` (`"qoslab.Server: the server was closed"`), as
--   every method but `stop` and `done` does
function Server:port() return (call(self, 'port')) end

--- Results of the last tests this server finished, oldest first (server
-- view: `local_role = "server"`). Only the last `keep_results` (default
-- 100) are kept; older ones are freed so a long-running server stays
-- bounded in memory.
-- @treturn table list of result tables; each also has `server_test` (the
--   test's number, as in `started`'s "test N") and `peer_port` (the client's
--   control connection port), to match it with its start line
-- @treturn integer number of tests finished since the start: the last
--   result listed is test number `total`, the first `total - #list + 1`
function Server:results()
  local list, total = call(self, 'results')
  for _, r in ipairs(list) do as_result(r) end
  return list, total
end

--- Number of tests finished since the start (kept or already freed).
-- @treturn integer
function Server:finished() return (call(self, 'finished')) end

--- Number of tests running now.
-- @treturn integer
function Server:tests_running() return (call(self, 'tests_running')) end

--- Number of control connections the server refused (bad cookie,
-- malformed or oversized messages, silent clients).
-- @treturn integer
function Server:rejected() return (call(self, 'rejected')) end

--- What went wrong so far, for a server's log.
-- @treturn integer control connections rejected (bad cookie, malformed or
--   oversized message, silence, a client that left before its test ran, a
--   test refused by a limit, an unidentified connection closed to make room)
-- @treturn integer tests that started and did not finish (client gone,
--   connection reset, ended by the data-idle watchdog or max_duration_s, ...)
-- @treturn string|nil the last of either, naming the peer, e.g. "test failed
--   from 10.0.0.2 port 41234: peer closed the control connection during the
--   test", "closed an unidentified connection, from 10.0.0.9 port 5555 (no
--   cookie for 0.3 s; its address held 8 unidentified, 0 of them data
--   connections its tests expect): max_unidentified_per_address (8) reached"
-- @treturn table the problem log: the last 256 problems (each rejection,
--   eviction, refusal, failed test, and request of a peer that its test ran
--   without: "request ignored from HOST port N: why") numbered above `since_seq`, oldest
--   first, each `{ seq = n (1, 2, ... since the start), test = the server's
--   test number (0 when the connection never became a test), time_unix_s,
--   host, port (the peer's), reason = the line as above }`; `total` = problems
--   since the start, `dropped` = problems above `since_seq` no longer kept
--   (more than 256 since then)
-- @tparam[opt=0] integer since_seq list only the problems numbered above it
--   (a log polls with the last `seq` it printed)
-- @usage local _, _, _, log = srv:problems(seen)
--   for _, p in ipairs(log) do print(p.reason); seen = p.seq end
function Server:problems(since_seq)
  if since_seq ~= nil and (math.type(since_seq) ~= 'integer' or since_seq < 0) then
    error('since_seq: expected an integer >= 0, got ' .. tostring(since_seq), 2)
  end
  local rejected, failed, last, log = call(self, 'problems', since_seq)
  return rejected, failed, last, log
end

--- The limits in effect (see `server`; defaults filled in).
-- @treturn table `max_tests`, `max_tests_per_address`, `max_streams_per_address`,
--   `max_unidentified`, `max_unidentified_per_address`, `data_idle_s` (0 = the
--   automatic rule), `max_duration_s`, `test_buffer_bytes`, `idle_timeout_s`
--   (default 30), `cookie_timeout_s` (10, or `idle_timeout_s` when shorter:
--   see `server`)
-- @usage print(srv:limits().max_tests_per_address) --> 2
function Server:limits() return (call(self, 'limits')) end

--- The latency probe responder's counters since the start.
-- The server answers `qoslab.latency` UDP probes on its port and TCP probe
-- connections (see manual/results.md, "The latency probe responder"):
-- @treturn table `udp_replies`, `udp_malformed` (requests with the probe's
--   magic that were not well formed: dropped), `udp_rate_limited` (dropped:
--   over 2000 replies/s per peer address or 20000/s in all), `udp_unknown`
--   (datagrams on the port that are neither a probe request nor a UDP
--   stream's connect message: ignored), `tcp_sessions`,
--   `tcp_refused` (over max_tests_per_address / max_tests probe sessions),
--   `tcp_replies`, `tcp_malformed` (connection closed), `tcp_rate_limited`,
--   `tcp_idle_closed` (silent for idle_timeout_s), `tcp_open` (now); integers
-- @usage print(srv:probe_counters().udp_replies)
function Server:probe_counters() return (call(self, 'probe_counters')) end

--- Tests started so far (parameters accepted), for a server's log.
-- @treturn integer tests started since the server started
-- @treturn string|nil the last one: peer address, protocol, streams,
--   direction, length and client kind, e.g. "test 3 from 10.0.0.2 port 41234: UDP,
--   4 streams, reverse (server sends), 10 s at 100 Mbit/s each, qoslab client"
function Server:started()
  local n, last = call(self, 'started')
  return n, last
end

--- True once a `one_off` server has served its test, or after `stop()`.
-- @treturn boolean
function Server:done() return (call(self, 'done')) end

--- Wait until at least n tests have finished since the start.
-- @tparam[opt=1] integer n number of finished tests to wait for
-- @tparam[opt=30] number timeout_s give up after this many seconds
-- @treturn table|nil the results list (the kept ones, as `results()`), or
--   nil, message, "ETIMEDOUT" / "EINTR"
-- @treturn integer tests finished since the start
-- @raise on n not an integer in 1..2^30 or timeout_s not in 0..86400, and
--   after `stop()`
function Server:wait_results(n, timeout_s)
  if getmetatable(self) ~= Server then
    error('qoslab.Server:wait_results: expected a qoslab.Server as self (call it as '
      .. 'srv:wait_results(...)), got ' .. type(self), 2)
  end
  n = check.integer('qoslab.Server:wait_results', 'n', n, 1, 1 << 30, 1)
  timeout_s = check.number('qoslab.Server:wait_results', 'timeout_s', timeout_s, 0, 86400, 30)
  local timer = require 'qoslab.timer'
  local deadline = timer.now() + timeout_s
  while true do
    local alive, done = pcall(self._ud.finished, self._ud)
    if not alive then error(done, 2) end   -- a stopped server: at the caller's line
    if done >= n then return self:results() end
    if timer.now() >= deadline then
      return nil, string.format('%d of %d tests finished within %g s', done, n, timeout_s),
        'ETIMEDOUT'
    end
    local ok, msg, code = timer.sleep(0.05)
    if not ok then return nil, msg, code end
  end
end

--- Stop accepting and end running tests (idempotent).
function Server:stop()
  if getmetatable(self) ~= Server then
    error('qoslab.Server:stop: expected a qoslab.Server as self (call it as srv:stop()), got ' .. type(self), 2)
  end
  if self._ud then self._ud:stop() end
  return true
end
Server.close = Server.stop
Server.__close = Server.stop
Server.__gc = Server.stop
function Server.__tostring(s)
  return tostring(s._ud)
end

return Server
