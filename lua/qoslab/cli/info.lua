--- `qoslab info` and `qoslab clock`: what a host is and what its clock
-- reads, for a program that drives qoslab on several hosts (over ssh).
--
--     qoslab info --json --netns lab --ifname veth0
--     qoslab clock --echo       (each line read comes back with CLOCK_MONOTONIC)
--
-- `info --json` prints the record `qoslab.meta.collect` makes for a local run
-- (kernel, hostname, cpu, qoslab_version, sysctls, interfaces with their
-- qdiscs and offloads) plus `mono_ns` (CLOCK_MONOTONIC) and `realtime_ns`
-- (CLOCK_REALTIME), integer nanoseconds read once the record is made. A
-- `--netns` that cannot be entered fails the command (exit 1, ENOENT for a
-- missing one, EPERM without root), and so does an `--ifname` that cannot
-- be read there (exit 1, ENODEV for a missing one; nothing printed). A part
-- of an interface that cannot be read (its offloads, its qdiscs) is an
-- `error` of that part, as in a run's meta.json.
-- `clock --echo` writes `LINE MONO_NS` for every line on stdin, flushed,
-- and exits 0 at its end: the round trip of each line bounds where the
-- host's clock was when it was read.
-- @module qoslab.cli.info
local cli = require 'qoslab.cli'

local M = {}

--- The `info` record: `qoslab.meta.collect(opts)` plus `mono_ns` and
-- `realtime_ns` (integer nanoseconds, CLOCK_MONOTONIC and CLOCK_REALTIME,
-- read after the record was made, one right after the other).
-- @tparam[opt] table opts as `qoslab.meta.collect` (`netns`, `ifnames`)
-- @treturn table the record
-- @raise as `qoslab.meta.collect` on bad opts
-- @usage local r = require('qoslab.cli.info').record{ifnames = {'lo'}}
function M.record(opts)
  local rec = require('qoslab.meta').collect(opts)
  local timer = require 'qoslab.timer'
  rec.mono_ns = timer.now_ns()
  rec.realtime_ns = timer.realtime_ns()
  return rec
end

local function run_info(a)
  if a.netns then
    local ok, err = pcall(require('qoslab.check').netns, 'qoslab info', '--netns', a.netns)
    if not ok then
      local text = tostring(err):gsub('^[^\n:]-qoslab/[%w_/]+%.lua:%d+: ', '', 1)
      cli.failure(text, 'EINVAL', '--netns')
      io.stderr:write(text, '\n')
      return 2
    end
    -- The namespace asked for must be there: the record of another one (its
    -- parts each holding the error) is no answer. meta.collect keeps such
    -- errors in the record for a run's places, where the rest still counts.
    local entered, msg, code = require('qoslab.netns').run(a.netns, function() return true end)
    if not entered then
      local text = string.format('qoslab info: --netns %s: %s', a.netns, tostring(msg))
      cli.failure(text, code, '--netns')
      io.stderr:write(text, ' (', tostring(code), ')\n')
      return 1
    end
  end
  local ok, rec = pcall(M.record, { netns = a.netns, ifnames = a.ifname })
  if not ok then
    local text = tostring(rec):gsub('^[^\n:]-qoslab/[%w_/]+%.lua:%d+: ', '', 1)
    cli.failure(text, 'EINVAL', cli.field_of(rec))
    io.stderr:write('qoslab info: ', text, '\n')
    return 2
  end
  -- Each interface asked for must be there, as the namespace must: a record
  -- holding only its error is no answer (a run's meta.json keeps it).
  for _, i in ipairs(rec.interfaces or {}) do
    if i.error then
      local text = string.format('qoslab info: --ifname %s: %s', i.ifname, i.error)
      cli.failure(text, cli.code_of(i.error, 'ENODEV'), '--ifname')
      io.stderr:write(text, '\n')
      return 1
    end
  end
  if a.json then
    -- dkjson writes integers as integers: cjson's 14 significant digits
    -- would round realtime_ns (19 digits) and a long uptime's mono_ns
    print(require('dkjson').encode(rec))
    return 0
  end
  local k = rec.kernel or {}
  print(string.format('host      %s', tostring(rec.hostname)))
  print(string.format('kernel    %s %s', tostring(k.release), tostring(k.machine or '')))
  print(string.format('cpu       %s x %s', tostring(rec.cpu and rec.cpu.count),
    tostring(rec.cpu and rec.cpu.model)))
  print(string.format('qoslab    %s', tostring(rec.qoslab_version)))
  print(string.format('mono_ns   %d', rec.mono_ns))
  print(string.format('realtime  %d ns', rec.realtime_ns))
  for _, i in ipairs(rec.interfaces or {}) do
    if i.error then
      print(string.format('%-9s %s', i.ifname, i.error))
    else
      local q = {}
      for _, d in ipairs(i.qdiscs or {}) do q[#q + 1] = tostring(d.kind) end
      print(string.format('%-9s mtu %s, %s, qdiscs: %s', i.ifname, tostring(i.mtu_bytes),
        tostring(i.operstate), #q > 0 and table.concat(q, ' ') or 'none'))
    end
  end
  return 0
end

--- Echo every line of `input` to `output` as `LINE MONO_NS` (the
-- CLOCK_MONOTONIC time it was read, integer ns), flushed per line, until the
-- input ends. Blocks in the read between lines (no busy loop).
-- @raise qoslab.core's interruption error when a signal ended the read
--   (with qoslab's handlers installed), or "stdin: ..." on a read error
-- @tparam[opt=io.stdin] file input
-- @tparam[opt=io.stdout] file output
-- @treturn integer lines echoed
-- @usage require('qoslab.cli.info').echo_clock()
function M.echo_clock(input, output)
  input, output = input or io.stdin, output or io.stdout
  output:setvbuf('line')
  local now_ns = require('qoslab.timer').now_ns
  local core = require 'qoslab.core'
  local n = 0
  while true do
    local line, err = input:read('l')
    if line == nil then
      -- a signal (qoslab's handlers: no restart) ends the read too
      if core.signal_pending() then error(core.interruption(), 0) end
      if err then error('stdin: ' .. tostring(err), 0) end
      return n
    end
    output:write(line, ' ', string.format('%d', now_ns()), '\n')
    output:flush()
    n = n + 1
  end
end

local function run_clock(a)
  if a.echo then
    require('qoslab.core').signals_install()
    M.echo_clock()
    return 0
  end
  local timer = require 'qoslab.timer'
  io.stdout:write(string.format('%d %d\n', timer.now_ns(), timer.realtime_ns()))
  return 0
end

cli.add('info', {
  describe = function(cmd)
    cmd:summary('What this host is: kernel, CPU, qoslab version, sysctls, interfaces, clocks.')
    cmd:option('--netns', 'Named network namespace whose sysctls and interfaces are read.')
    cmd:option('--ifname', 'An interface whose qdiscs, offloads and link state are read '
      .. '(repeat for more).'):count('*'):argname('DEV')
    cmd:flag('--json', 'Print the record as JSON (with mono_ns and realtime_ns).')
  end,
  run = run_info,
})

cli.add('clock', {
  describe = function(cmd)
    cmd:summary('Print CLOCK_MONOTONIC and CLOCK_REALTIME (ns); with --echo, every line '
      .. 'read on stdin back with CLOCK_MONOTONIC.')
    cmd:flag('--echo', 'For every line on stdin write "LINE MONO_NS", flushed; exit 0 at '
      .. 'the end of stdin.')
  end,
  run = run_clock,
})

return M
