--- `qoslab shape set|show|clear|stats DEV`: the rate limit of
-- `qoslab.shape` (tbf or htb at the root of a device's egress) from the
-- command line, the spec as JSON in and out.
--
--     qoslab shape set veth0 --spec-json '{"kind": "tbf", "rate_bps": 100000000}' --json
--     qoslab shape show veth0 --netns lab --json     (the spec as shape.get reads it, or null)
--     qoslab shape clear veth0 --netns lab --json
--
-- `--spec-json` is the Lua spec table of `qoslab.shape.apply` as a JSON
-- object. With `--json` every action prints one JSON document: set
-- `{"ok": true, "dev":, "kind":, "handle":, "netem_parent":, "spec": what is
-- there now}`, show the spec or `null`, clear `{"ok": true, "dev":}`, stats
-- the list of qdiscs with their counters. The shaper is always the root
-- qdisc: `--parent` takes only "root". Exit status: 0 done, 1 a failure of
-- the world (message and code on stderr), 2 bad input.
-- @module qoslab.cli.shape
local cli = require 'qoslab.cli'

local M = {}

local function eprint(...)
  io.stderr:write(...)
  io.stderr:write('\n')
end

-- The text form of a spec: "tbf rate_bps=... burst_bytes=..." (keys sorted).
local function spec_words(spec)
  local keys = {}
  for k in pairs(spec) do if k ~= 'kind' then keys[#keys + 1] = k end end
  table.sort(keys)
  local out = { tostring(spec.kind) }
  for _, k in ipairs(keys) do out[#out + 1] = string.format('%s=%s', k, tostring(spec[k])) end
  return table.concat(out, ' ')
end

local function run(a)
  local shape = require 'qoslab.shape'
  local dkjson = require 'dkjson'
  local verb, dev = a.action, a.dev
  local o = a.netns and { netns = a.netns } or nil
  local ok, r1, r2, r3 = pcall(function()
    if a.parent and a.parent ~= 'root' then
      error(string.format('qoslab shape %s: --parent: the shaper is the root qdisc of the device '
        .. '(netem goes under it, at the netem_parent set prints); only "root" is taken, got %q',
        verb, a.parent), 0)
    end
    if verb ~= 'set' and a.spec_json then
      error('qoslab shape ' .. verb .. ': --spec-json is for set', 0)
    end
    if verb == 'show' then return shape.get(dev, o)
    elseif verb == 'clear' then return shape.clear(dev, o)
    elseif verb == 'stats' then return shape.stats(dev, o)
    end
    if not a.spec_json then
      error('qoslab shape set: needs --spec-json, e.g. --spec-json \'{"kind": "tbf", '
        .. '"rate_bps": 100000000}\'', 0)
    end
    local spec = require('qoslab.cli.netem').spec_from_json('--spec-json', a.spec_json)
    return shape.apply(dev, spec, o)
  end)
  if not ok then
    local text = require('qoslab.cli.netem').usage_text(r1)
    local field = cli.field_of(r1)
      or (text:find('--spec-json', 1, true) and '--spec-json')
      or (text:find('--parent', 1, true) and '--parent')
    cli.failure(text, 'EINVAL', field)
    eprint(text)
    return 2
  end
  if r1 == nil and r2 ~= nil then
    cli.failure(string.format('qoslab shape %s %s: %s', verb, dev, tostring(r2)), r3 or 'EUNKNOWN')
    eprint('qoslab shape ', verb, ' ', dev, ': ', tostring(r2), r3 and (' (' .. r3 .. ')') or '')
    return 1
  end
  -- dkjson: integers (rates in bits/s, bytes) as integers
  local function json(v) print(dkjson.encode(v)) end
  if verb == 'set' then
    -- What set leaves is meant to stay, as tc's would: not a killed run's
    -- leftover for `qoslab cleanup` (`clear` removes it).
    require('qoslab.netns')._untrack(function() return true end)
    if a.json then
      json { ok = true, dev = dev, kind = r1.kind, handle = r1.handle,
             netem_parent = r1.netem_parent, spec = r1.spec }
    else
      print(string.format('%s: %s (netem goes at parent %s)', dev, spec_words(r1.spec),
        tostring(r1.netem_parent)))
    end
  elseif verb == 'show' then
    if a.json then print(r1 == nil and 'null' or dkjson.encode(r1))
    elseif r1 == nil then print(dev .. ': no shaper')
    else print(dev .. ': ' .. spec_words(r1)) end
  elseif verb == 'stats' then
    if a.json then print(#r1 == 0 and '[]' or dkjson.encode(r1))
    else
      for _, q in ipairs(r1) do
        print(string.format('%-8s %-6s parent %-6s bytes %d packets %d drops %d overlimits %d '
          .. 'backlog %d', q.kind, q.handle, q.parent, q.bytes, q.packets, q.drops, q.overlimits,
          q.backlog_bytes))
      end
    end
  else
    if a.json then json { ok = true, dev = dev } else print(dev .. ': shaper removed') end
  end
  return 0
end

M.command = {
  describe = function(cmd)
    cmd:summary('Set, show, clear or count the rate limit (tbf or htb) of a device; the spec '
      .. 'as JSON.')
    cmd:argument('action', 'set | show | clear | stats'):choices { 'set', 'show', 'clear', 'stats' }
    cmd:argument('dev', 'Network device.')
    cmd:option('--spec-json', 'For set: the qoslab.shape Lua spec as a JSON object, e.g. '
      .. '\'{"kind": "tbf", "rate_bps": 100000000}\' or \'{"kind": "htb", "rate_bps": 1e9}\'.')
      :argname('JSON')
    cmd:option('--netns', 'Named network namespace of the device (ip netns).')
    cmd:option('--parent', 'Where the shaper goes: only root (the default) is taken.')
    cmd:flag('--json', 'Print JSON (set and clear: {"ok": true, ...}).')
  end,
  run = run,
}

cli.add('shape', M.command)

return M
