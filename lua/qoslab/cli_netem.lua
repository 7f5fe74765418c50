--- `qoslab netem DEV [show | clear | stats | tc-netem(8) options]`:
-- netem from the command line, without `tc`.
--
--     qoslab netem veth0 delay 50ms 5ms loss 1% limit auto
--     qoslab netem veth0                  (show, in tc-netem(8) syntax)
--     qoslab netem veth0 stats --json
--     qoslab netem veth0 clear --ingress
--
-- `limit auto` sizes the queue as `qoslab.netem` documents. Put `--` before
-- options with negative numbers (rate overheads).
-- @module qoslab.cli_netem
local cli = require 'qoslab.cli'

local function opts_of(a)
  return { netns = a.netns, parent = a.parent, direction = a.ingress and 'ingress' or nil,
           ingress_src = a.src }
end

cli.add('netem', {
  describe = function(cmd)
    cmd:summary('Show, set, clear or count a netem impairment (tc-netem(8) syntax).')
    cmd:argument('dev', 'Network device.')
    cmd:argument('words', 'show | clear | stats | tc-netem(8) options.'):args('*')
    cmd:option('--netns', 'Network namespace (ip netns name).')
    cmd:option('--parent', 'Parent class MAJ:MIN (default root).')
    cmd:flag('--ingress', 'Impair incoming traffic (through an ifb device).')
    cmd:option('--src', 'With --ingress: only traffic from ADDR[/PREFIX].')
    cmd:flag('--json', 'Print JSON.')
  end,
  run = function(a)
    local netem = require 'qoslab.netem'
    local cjson = require 'cjson'
    local o = opts_of(a)
    local verb = a.words[1] or 'show'
    local function fail(msg, code)
      io.stderr:write('qoslab netem: ', tostring(msg), code and (' (' .. code .. ')') or '', '\n')
      return 1
    end
    if verb == 'show' and #a.words <= 1 then
      local spec, msg, code = netem.get(a.dev, o)
      if msg then return fail(msg, code) end
      if a.json then print(cjson.encode(spec or cjson.null))
      elseif spec then print(netem.format(spec))
      else print('no netem on ' .. a.dev) end
      return 0
    elseif verb == 'clear' and #a.words == 1 then
      local removed, msg, code = netem.clear(a.dev, o)
      if removed == nil then return fail(msg, code) end
      return 0
    elseif verb == 'stats' and #a.words == 1 then
      local st, msg, code = netem.stats(a.dev, o)
      if msg then return fail(msg, code) end
      if not st then print('no netem on ' .. a.dev) return 0 end
      if a.json then print(cjson.encode(st)) return 0 end
      for _, k in ipairs { 'packets', 'bytes', 'drops', 'overlimits', 'requeues', 'backlog_packets', 'backlog_bytes' } do
        print(string.format('%-16s %d', k, st[k]))
      end
      return 0
    end
    local words, auto = {}, false
    for i, w in ipairs(a.words) do
      if w == 'auto' and a.words[i - 1] == 'limit' then auto = true; words[#words] = nil
      else words[#words + 1] = w end
    end
    local ok, spec = pcall(netem.parse, table.concat(words, ' '))
    if not ok then return fail(spec) end
    if auto then spec.limit_packets = 'auto' end
    local r, msg, code = netem.apply(a.dev, spec, o)
    if not r then return fail(msg, code) end
    if a.json then print(cjson.encode(r)) else print(netem.format(r.spec)) end
    return 0
  end,
})

return {}
