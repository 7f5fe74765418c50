--- `qoslab client --json-stream`: iperf3 3.17's line-delimited JSON events,
-- one object per line, written and flushed as they happen:
-- `{"event":"start","data":START}` once (before the first interval),
-- `{"event":"interval","data":INTERVAL}` per interval report,
-- `{"event":"end","data":END}` once; where a test fails,
-- `{"event":"error","data":"MESSAGE (CODE)"}` and then an `end` event
-- with what was measured (`{}` when nothing was). START, INTERVAL and END
-- are the `start`, `intervals[k]` and `end` of `-J` (qoslab.traffic.iperf3_json).
-- @module qoslab.cli.json_stream
local iperf3_json = require 'qoslab.traffic.iperf3_json'

local M = {}

local Stream = {}
Stream.__index = Stream

local function encode(v)
  return require('dkjson').encode(v)
end

--- A writer of events to `sink` (qoslab.cli.output).
-- @tparam table sink
-- @treturn table with `:start(ctx)`, `:interval(ctx, iv)`, `:finish(res)`,
--   `:error(msg)`
function M.new(sink)
  return setmetatable({ sink = sink, started = false }, Stream)
end

function Stream:event(name, data)
  self.sink:json(encode { event = name, data = data })
end

--- The start event (once; later calls do nothing).
-- @tparam table ctx a result, or what a running test knows
--   (`iperf3_json.start_json`'s argument)
function Stream:start(ctx)
  if self.started then return end
  self.started = true
  self:event('start', iperf3_json.start_json(ctx))
end

--- An interval event.
-- @tparam table ctx the test's shape (`proto`, `bidir`, `reverse`, `local_role`)
-- @tparam table iv a live interval record
function Stream:interval(ctx, iv)
  self:event('interval', iperf3_json.interval_json(ctx, iv))
end

--- The end event of a result (and its start event if none went out).
-- @tparam table res
function Stream:finish(res)
  self:start(res)
  self:event('end', iperf3_json.end_json(res))
end

--- An error event, then an empty end event: the test produced no result.
-- @tparam string msg
function Stream:error(msg)
  self:event('error', msg)
  self:event('end', setmetatable({}, { __jsontype = 'object' }))
end

return M
