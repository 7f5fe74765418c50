--- The definitions of the standard tests (`qoslab.stdtest`): what flows each
-- test runs, in which direction, with which DSCP mark, and whether the
-- latency probe runs beside them or alone.
--
-- They follow flent's test definitions in semantics: rrul loads the link
-- with four TCP uploads and four TCP downloads at once, one of each in the
-- DSCP classes BE (CS0), BK (CS1), CS5 and EF, while it measures the round
-- trip; tcp_nup / tcp_ndown run N TCP flows one way with the probe beside;
-- udp_flood sends one unresponsive UDP stream at a fixed rate; latency is
-- the probe alone. flent's test length is 60 s and its loaders start 5 s
-- after the latency measurement and stop 5 s before it (its `--delay`):
-- here the probe's idle phase (`idle_s`) before and after the load.
-- @module qoslab.stdtest.defs

local M = {}

--- The DSCP classes of rrul, in flent's order: `{name, dscp, tos}`, where
-- `tos` is the IP TOS byte (DSCP << 2, ECN bits 0), as `tos` of a traffic
-- test takes it (RFC 2474 for the field, RFC 4594 for the classes).
M.CLASSES = {
  { name = 'BE', dscp = 0, tos = 0 << 2 },    -- best effort (CS0)
  { name = 'BK', dscp = 8, tos = 8 << 2 },    -- background (CS1)
  { name = 'CS5', dscp = 40, tos = 40 << 2 },
  { name = 'EF', dscp = 46, tos = 46 << 2 },  -- expedited forwarding
}

-- A definition: `description`, `probe` ("beside" | "alone"), `options`
-- (the option names this test takes besides the common ones) and `flows(o)`,
-- the flows for the resolved options `o`. A flow is one traffic test:
-- `label`, `direction` ("up": client to server, "down": server to client,
-- "both": a bidir test), `proto`, `tos` and `class` (one mark for every
-- stream), or `classes` and `tos_per_stream` (stream i of each direction is
-- class i), `parallel` (streams of the one test, per direction),
-- `bitrate_bps`.
M.tests = {}

M.tests.rrul = {
  description = 'Realtime Response Under Load: 4 TCP uploads and 4 TCP downloads at once, '
    .. 'one of each per DSCP class (BE, BK, CS5, EF), with the latency probe beside',
  probe = 'beside',
  options = {},
  -- One bidirectional test of 4 streams each way: stream i of each direction
  -- carries class i's TOS (tos_per_stream, set by the server on the streams
  -- it sends), so a server's default limit of 2 tests per address admits it.
  flows = function()
    local classes, tos = {}, {}
    for i, c in ipairs(M.CLASSES) do classes[i], tos[i] = c.name, c.tos end
    return { { label = 'TCP upload and download', direction = 'both', proto = 'tcp',
               bidir = true, parallel = #M.CLASSES, classes = classes, tos_per_stream = tos } }
  end,
}

M.tests.tcp_nup = {
  description = 'TCP upload: N streams (default 4) with the latency probe beside',
  probe = 'beside',
  options = { streams = true },
  flows = function(o)
    return { { label = 'TCP upload', direction = 'up', proto = 'tcp', class = 'BE', tos = 0,
               parallel = o.streams } }
  end,
}

M.tests.tcp_ndown = {
  description = 'TCP download: N streams (default 4) with the latency probe beside',
  probe = 'beside',
  options = { streams = true },
  flows = function(o)
    return { { label = 'TCP download', direction = 'down', proto = 'tcp', class = 'BE', tos = 0,
               parallel = o.streams } }
  end,
}

M.tests.udp_flood = {
  description = 'UDP flood: one unresponsive UDP stream at a fixed rate (default 100 Mbit/s) '
    .. 'with the latency probe beside',
  probe = 'beside',
  options = { bitrate_bps = true },
  flows = function(o)
    return { { label = 'UDP upload', direction = 'up', proto = 'udp', class = 'BE', tos = 0,
               parallel = 1, bitrate_bps = o.bitrate_bps } }
  end,
}

M.tests.latency = {
  description = 'Latency alone: the probe without load (round trip, loss)',
  probe = 'alone',
  options = {},
  flows = function() return {} end,
}

--- The names of the tests, sorted.
-- @treturn {string,...}
function M.names()
  local names = {}
  for k in pairs(M.tests) do names[#names + 1] = k end
  table.sort(names)
  return names
end

return M
