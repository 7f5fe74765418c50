--- `qoslab test NAME HOST` and `qoslab test --list`: the standard tests
-- (qoslab.stdtest) from the command line. The run goes to a results folder
-- like `qoslab run`'s (`--out DIR`, default results/<test>-<UTC time>), its
-- tables to stdout.
-- @module qoslab.cli.stdtest
local cli = require 'qoslab.cli'

local M = {}

local function eprint(...)
  io.stderr:write(table.concat({ ... }), '\n')
  io.stderr:flush()
end

local function num_in(min, max, what)
  return function(s)
    local n = tonumber(s)
    if not n or n ~= n or n == math.huge or n == -math.huge or n < min or n > max then
      return nil, string.format("expected %s, got '%s'", what, s)
    end
    return n
  end
end

local function conv(flag, f)
  return function(s)
    local v, err = f(s)
    if v == nil then return nil, flag .. ': ' .. tostring(err) end
    return v
  end
end

local function int_in(min, max)
  return function(s)
    local n = tonumber(s)
    if not n or math.type(n) ~= 'integer' or n < min or n > max then
      return nil, string.format("expected an integer in [%d, %d], got '%s'", min, max, s)
    end
    return n
  end
end

--- Add the `test` arguments and flags to an argparse command.
function M.describe(cmd)
  local traffic_cli = require 'qoslab.cli.traffic'
  cmd:summary('Run a standard test (rrul, tcp_nup, tcp_ndown, udp_flood, latency) against a qoslab server.')
  cmd:description('Each test runs its flows at once with the latency probe beside, prints '
    .. 'per-flow throughput and latency, and writes DIR/results.jsonl. rrul is one test of 4 '
    .. 'streams each way, one per DSCP class; a server with its default limits runs every test.')
  cmd:argument('name', 'Test name (see --list).'):args('?')
  cmd:argument('host', 'Server host name or address.'):args('?')
  cmd:flag('--list', 'List the standard tests and exit.')
  cmd:option('-p --port', 'Server port (default 5201).'):convert(conv('-p', int_in(1, 65535)))
  cmd:option('-t --duration', 'Seconds of load (default 60; the latency test: of probing).')
    :convert(conv('-t', num_in(0.001, 86400, 'a positive number of seconds (at most 86400)')))
  cmd:option('--idle', 'Seconds the probe measures before the load and after it (default 5).')
    :convert(conv('--idle', num_in(0, 3600, 'a number of seconds in [0, 3600]')))
  cmd:option('-P --streams', 'Streams of tcp_nup / tcp_ndown (default 4).')
    :convert(conv('-P', int_in(1, 128)))
  cmd:option('-b --bitrate', 'Rate of udp_flood, bits/s (K/M/G/T = 1000; default 100M).')
    :convert(conv('-b', traffic_cli.parse_rate))
  cmd:option('--netns', 'Named network namespace to run the client and probe in.')
  cmd:option('--probe-interval', 'Milliseconds between probe requests (default: the probe\'s).')
    -- only a number here: the probe's own check names its range
    :convert(conv('--probe-interval', num_in(-math.huge, math.huge, 'a number of milliseconds')))
  cmd:option('--probe-proto', 'Probe protocol: udp, icmp or tcp (default udp).')
    :choices { 'udp', 'icmp', 'tcp' }
  cmd:flag('--no-probe', 'Run the load without the latency probe.')
  cmd:option('--out', 'Results folder (default results/<test>-<UTC time>).')
end

-- Option keys back to the flags that set them, for error messages.
local FLAG_OF = {
  host = 'HOST', port = '-p', duration_s = '-t', idle_s = '--idle', streams = '-P',
  bitrate_bps = '-b', netns = '--netns', probe = '--probe-*', ['probe.interval_ms'] = '--probe-interval',
  ['probe.proto'] = '--probe-proto',
}

--- Rewrite "qoslab.stdtest.run: opts.key: ..." as "FLAG (key): ...".
-- @tparam string msg
-- @treturn string
function M.flag_message(msg)
  msg = tostring(msg):gsub('^.-qoslab%.[%w_.]+: ', '')
  return (msg:gsub('opts%.([%w_.]+)', function(k)
    return FLAG_OF[k] and (FLAG_OF[k] .. ' (' .. k .. ')') or k
  end))
end

--- Options for `qoslab.stdtest.run` from parsed flags.
-- @tparam table a argparse result of a `test` command
-- @treturn table
function M.run_opts(a)
  local o = { host = a.host, port = a.port, duration_s = a.duration, idle_s = a.idle,
              streams = a.streams, bitrate_bps = a.bitrate and math.tointeger(a.bitrate) or a.bitrate,
              netns = a.netns }
  if a.no_probe then
    o.probe = false
  elseif a.probe_interval or a.probe_proto then
    o.probe = { interval_ms = a.probe_interval, proto = a.probe_proto }
  end
  return o
end

local function list()
  local stdtest = require 'qoslab.stdtest'
  local tests = stdtest.list()
  local w = 0
  for _, t in ipairs(tests) do w = math.max(w, #t.name) end
  for _, t in ipairs(tests) do
    print(string.format('%-' .. w .. 's  %s', t.name, t.description))
  end
end

local function known()
  local names = {}
  for _, t in ipairs(require('qoslab.stdtest').list()) do names[#names + 1] = t.name end
  return table.concat(names, ', ')
end

local function run(a)
  if a.list then list() return 0 end
  local stdtest = require 'qoslab.stdtest'
  if not a.name then
    eprint('qoslab test: NAME: expected a standard test (', known(), '); --list describes them')
    return 2
  end
  local found = false
  for _, t in ipairs(stdtest.list()) do found = found or t.name == a.name end
  if not found then
    eprint('qoslab test: NAME: unknown test "', a.name, '": expected one of ', known())
    return 2
  end
  if not a.host then
    eprint('qoslab test: HOST: expected the host of a qoslab server (qoslab server)')
    return 2
  end
  local o = M.run_opts(a)
  -- Bad options are told before a results folder is made.
  local checked, resolved = pcall(stdtest.check, a.name, o)
  if not checked then
    eprint('qoslab test: ', M.flag_message(resolved))
    return 2
  end
  local cli_plan = require 'qoslab.cli.plan'
  local out, made = cli_plan.prepare_out('test', a.name, a.out, false)
  if not out then return made end
  o.out = out
  require('qoslab.core').signals_install()
  -- what the run will take, since it prints nothing until it ends
  local flows = require('qoslab.stdtest.defs').tests[a.name].flows(resolved)
  local nflows, nstreams = #flows, 0
  for _, f in ipairs(flows) do nstreams = nstreams + f.parallel * (f.bidir and 2 or 1) end
  local what = nflows > 0 and string.format('%d flow%s%s for %g s', nflows, nflows > 1 and 's' or '',
    nstreams > nflows and string.format(' (%d streams)', nstreams) or '', resolved.duration_s)
    or string.format('the probe for %g s', resolved.duration_s)
  if nflows > 0 and resolved.probe and resolved.idle_s > 0 then
    what = what .. string.format(', probe idle %g s before and after', resolved.idle_s)
  end
  eprint('qoslab test: ', a.name, ' to ', a.host, ': ', what, '; results in ', cli_plan.shell_quote(out))
  local done, r, msg, code = pcall(stdtest.run, a.name, o)
  if not done then
    -- interrupted (or any raised error): as `qoslab run` does, an empty
    -- folder goes and says so, one with results is named
    if made and cli_plan.remove_if_empty(out) then
      eprint('qoslab test: nothing was written; removed the empty ', cli_plan.shell_quote(out))
    elseif made then
      eprint('qoslab test: results so far in ', cli_plan.shell_quote(out))
    end
    error(r, 0)
  end
  if not r then
    eprint('qoslab test: ', a.name, ': ', tostring(msg), ' (', tostring(code), ')')
    if made then cli_plan.remove_if_empty(out) end
    return 1
  end
  io.write(stdtest.format(r))
  io.flush()
  return 0
end

cli.add('test', { describe = M.describe, run = run })

return M
