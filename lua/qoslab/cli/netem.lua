--- `qoslab netem show|set|clear|stats DEV [tc-netem(8) options]`:
-- netem from the command line, over rtnetlink (no `tc` process).
--
--     qoslab netem set veth0 delay 50ms 5ms loss 1% limit auto
--     qoslab netem show veth0                (tc-netem(8) syntax, or --json)
--     qoslab netem stats veth0 --json
--     qoslab netem clear veth0 --ingress
--     qoslab netem set veth0 --spec-json '{"delay_ms": 50, "loss_pct": 1}' --json
--     qoslab netem check loss 5% 25%      (no device, no kernel netem needed)
--     qoslab netem check --spec-json '{"delay_ms": 5}' --json
--
-- `limit auto` sizes the queue as `qoslab.netem` documents. Put `--` before
-- options with negative numbers (rate overheads). Exit status: 0 done,
-- 1 a failure of the world (message and code on stderr), 2 bad input.
-- @module qoslab.cli.netem
local cli = require 'qoslab.cli'

local M = { commands = {} }

local function eprint(...)
  io.stderr:write(...)
  io.stderr:write('\n')
end

local function opts_of(a)
  local o = { netns = a.netns, parent = a.parent,
              direction = a.ingress and 'ingress' or nil, ingress_src = a.src }
  return next(o) and o or nil
end

-- The spec in tc-netem(8) syntax, `limit auto` included (format refuses it).
local function spec_text(netem, spec)
  if spec.limit_packets ~= 'auto' then return netem.format(spec) end
  local c = {}
  for k, v in pairs(spec) do c[k] = v end
  c.limit_packets = nil
  local t = netem.format(c):gsub('^limit %d+ ?', '')
  return (t == '' and '' or t .. ' ') .. 'limit auto'
end

-- The advice names the Lua spec's fields; keep_order has no tc-netem word,
-- so on the command line a warning about reordering also says how to keep
-- the order there.
local function cli_warning(text)
  eprint('warning: ', text)
  if text:find('spec.keep_order = true', 1, true) then
    eprint('  (on the command line: give a rate at the link\'s speed, e.g. rate 10gbit, which '
      .. 'is what keep_order sets; keep_order itself is a field of Lua specs)')
  end
end

-- `check SPEC` or `check --spec-json JSON`: the words after `check` are all
-- the spec (argparse's dev included). The canonical spec and netem.check's
-- advice, without the kernel.
local function check_only(a, netem, cjson)
  local words = { a.dev }
  for _, w in ipairs(a.spec) do words[#words + 1] = w end
  local ok, canon, advice = pcall(function()
    local spec
    if a.spec_json then
      if #words > 0 then
        error('qoslab netem check: --spec-json or tc-netem options, not both (got "'
          .. table.concat(words, ' ') .. '" too)', 0)
      end
      spec = M.spec_from_json('--spec-json', a.spec_json)
    elseif #words == 0 then
      error('qoslab netem check: needs tc-netem options, e.g. delay 50ms loss 1% (or --spec-json)', 0)
    else
      spec = netem.parse(table.concat(words, ' '))
    end
    local c, adv = netem.check(spec, 'qoslab netem check')
    return c, adv
  end)
  if not ok then
    local text = tostring(canon):gsub('^[^\n:]-qoslab/cli/netem%.lua:%d+: ', '', 1)
    cli.failure(text, 'EINVAL', cli.field_of(text) or (a.spec_json and '--spec-json') or nil)
    eprint(text)
    -- `check dev spec`, as `set` is written: the spec alone parses
    if not a.spec_json and #words > 1 and pcall(netem.parse, table.concat(words, ' ', 2)) then
      eprint(string.format('qoslab netem check: takes the spec alone, no device: drop %q '
        .. '(qoslab netem check %s)', words[1], table.concat(words, ' ', 2)))
    end
    return 2
  end
  if a.json then
    print(cjson.encode { spec = canon, advice = advice })
  else
    for _, adv in ipairs(advice) do cli_warning(adv.message) end
    print('netem ' .. spec_text(netem, canon))
  end
  return 0
end

--- A Lua spec table from JSON text (`--spec-json`, for netem and shape):
-- JSON numbers without a fraction become integers, as a Lua spec writes
-- them; `null` is refused (a spec leaves a key out instead).
-- @tparam string flag the option, for messages (e.g. "--spec-json")
-- @tparam string text JSON: one object
-- @treturn table the spec
-- @raise "FLAG: ..." naming what is wrong (not JSON, not an object, a null)
function M.spec_from_json(flag, text)
  local cjson = require 'cjson'
  local ok, v = pcall(cjson.decode, text)
  if not ok then
    error(string.format('%s: expected a JSON object, e.g. \'{"delay_ms": 50}\', got %q (%s)', flag,
      text, (tostring(v):gsub('^.-: ', ''))), 0)
  end
  if type(v) ~= 'table' or type(next(v)) == 'number' then
    error(string.format('%s: expected a JSON object, got %s', flag, cjson.encode(v)), 0)
  end
  local function lua_of(x, path)
    if x == cjson.null then
      error(string.format('%s: %s: null: leave the key out instead', flag, path), 0)
    end
    if type(x) == 'number' then return math.tointeger(x) or x end
    if type(x) ~= 'table' then return x end
    local t = {}
    for k, e in pairs(x) do
      t[k] = lua_of(e, type(k) == 'number' and string.format('%s[%d]', path, k) or (path .. '.' .. k))
    end
    return t
  end
  return lua_of(v, 'spec')
end

-- A caller's mistake is raised at the caller's line, here: of no use on
-- the command line, so that position goes (a fault deeper keeps its own).
local function usage_text(e)
  return (tostring(e):gsub('^[^\n:]-qoslab/cli/[%w_]+%.lua:%d+: ', '', 1))
end
M.usage_text = usage_text

-- The error argparse gives for a missing argument, for the actions that
-- need the device (dev is optional in the parser: check takes none).
local function missing_dev(cmd_usage)
  local msg = "missing argument 'dev'"
  cli.failure(msg, 'EINVAL', 'dev')
  eprint(cmd_usage)
  eprint('qoslab netem: error: ', msg)
  eprint('see qoslab netem --help')
  return 2
end

local function run(a)
  local netem = require 'qoslab.netem'
  local cjson = require 'cjson'
  if a.action == 'check' then return check_only(a, netem, cjson) end
  if not a.dev then return missing_dev(M.USAGE) end
  local o = opts_of(a)
  local verb, dev = a.action, a.dev
  local spec
  local ok, r1, r2, r3 = pcall(function()
    if verb ~= 'set' and #a.spec > 0 then
      error('qoslab netem ' .. verb .. ': takes no tc-netem options (got "' .. table.concat(a.spec, ' ') .. '")', 0)
    end
    if verb ~= 'set' and a.spec_json then
      error('qoslab netem ' .. verb .. ': --spec-json is for set', 0)
    end
    if verb == 'show' then return netem.get(dev, o)
    elseif verb == 'clear' then return netem.clear(dev, o)
    elseif verb == 'stats' then return netem.stats(dev, o)
    end
    if a.spec_json then
      if #a.spec > 0 then
        error('qoslab netem set: --spec-json or tc-netem options, not both (got "'
          .. table.concat(a.spec, ' ') .. '" too)', 0)
      end
      spec = M.spec_from_json('--spec-json', a.spec_json)
    else
      if #a.spec == 0 then
        error('qoslab netem set: needs tc-netem options, e.g. delay 50ms loss 1% (or --spec-json)', 0)
      end
      spec = netem.parse(table.concat(a.spec, ' '))  -- `limit auto` included
    end
    if o then o.quiet = true else o = { quiet = true } end
    return netem.apply(dev, spec, o)
  end)
  if not ok then
    local text = usage_text(r1)
    cli.failure(text, 'EINVAL', cli.field_of(r1) or (text:find('--spec-json', 1, true) and '--spec-json'))
    eprint(text)
    return 2
  end
  if r1 == nil and r2 ~= nil then
    cli.failure(string.format('qoslab netem %s %s: %s', verb, dev, tostring(r2)), r3 or 'EUNKNOWN')
    eprint('qoslab netem ', verb, ' ', dev, ': ', tostring(r2), r3 and (' (' .. r3 .. ')') or '')
    if verb == 'set' and r3 == 'ENOTSUP' then
      local words = #a.spec > 0 and table.concat(a.spec, ' ')
        or select(2, pcall(spec_text, netem, spec))
      eprint('(qoslab netem check ', tostring(words), ' shows the advice for that spec ',
        'without netem in the kernel)')
    end
    return 1
  end
  if verb == 'show' then
    if a.json then print(cjson.encode(r1 or cjson.null))
    elseif r1 == nil then print(dev .. ': no netem')
    else print(dev .. ': netem ' .. netem.format(r1)) end
  elseif verb == 'stats' then
    if a.json then print(cjson.encode(r1 or cjson.null))
    elseif not r1 then print(dev .. ': no netem')
    else
      for _, k in ipairs { 'packets', 'bytes', 'drops', 'overlimits', 'requeues',
                           'backlog_packets', 'backlog_bytes' } do
        if r1[k] ~= nil then print(string.format('%-16s %d', k, r1[k])) end
      end
    end
  elseif verb == 'set' then
    -- What set leaves is meant to stay, as tc's would: not a killed run's
    -- leftover for `qoslab cleanup` (`clear` removes it).
    require('qoslab.netns')._untrack(function() return true end)
    for _, w in ipairs(type(r1) == 'table' and r1.warnings or {}) do cli_warning(w) end
    if a.json then
      local doc = { ok = true, dev = dev }
      for k, v in pairs(r1) do doc[k] = v end
      print(cjson.encode(doc))
    else print(dev .. ': netem ' .. netem.format(r1.spec)) end
  elseif a.json then
    print(cjson.encode { ok = true, dev = dev, removed = r1 ~= false })
  elseif r1 == false then
    print('no netem on ' .. dev)
  else
    print(dev .. ': netem removed')
  end
  return 0
end

--- The command's usage line (as the parser writes it on an error).
M.USAGE = 'Usage: qoslab netem ACTION [DEV] [SPEC...] [options]'

M.commands.netem = {
  describe = function(cmd)
    cmd:summary('Show, set, clear or count netem on a device (tc-netem(8) syntax); check a spec.')
    cmd:argument('action', 'show | set | clear | stats | check (a spec alone: no device, no '
      .. 'kernel netem; prints it canonical and its advice)')
      :choices { 'show', 'set', 'clear', 'stats', 'check' }
    cmd:argument('dev', 'Network device (check takes none: its first word is the spec\'s).')
      :args('?')
    cmd:argument('spec', 'For set: tc-netem(8) options, e.g. delay 50ms 5ms loss 1% limit auto.'):args('*')
    cmd:option('--netns', 'Named network namespace of the device (ip netns).')
    cmd:option('--parent', 'Parent class MAJ:MIN (default root), e.g. 1:1 under tbf.')
    cmd:flag('--ingress', 'Impair incoming traffic (through an ifb device).')
    cmd:option('--src', 'With --ingress: only traffic from ADDR[/PREFIX].')
    cmd:option('--spec-json', 'For set and check, instead of tc-netem options: the qoslab.netem '
      .. 'Lua spec as a JSON object, e.g. \'{"delay_ms": 50, "loss_pct": 1}\'.'):argname('JSON')
    cmd:flag('--json', 'Print JSON (set and clear: {"ok": true, ...} with what was applied).')
  end,
  run = run,
  -- "delay -5ms": the spec's words reach netem.parse, which names the field
  dash_words = true,
}

cli.add('netem', M.commands.netem)

return M
