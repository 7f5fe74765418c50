-- `qoslab cleanup` in the netem guest removed a user's own root netem and a
-- netem child under the user's htb when a dead pid's state file named them.
-- Now only what still has the identity qoslab recorded is removed: a user's
-- netem is skipped and stays; a killed run's own netem (root and ingress
-- with its ifb) goes.
local cjson = require 'cjson'
local netns = require 'qoslab.netns'
local core = require 'qoslab.core'

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
local function sh(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1'))
  local out = p:read('a')
  local ok = p:close()
  return out, ok
end
local function must(cmd)
  local out, ok = sh(cmd)
  assert(ok, cmd .. ': ' .. out)
  return out
end
local checkout = require('qoslab.fs').cwd()
local build = os.getenv('QOSLAB_BUILD') or 'build'

local function kinds(ns, dev)
  local out = {}
  for _, st in ipairs(assert(core.qdisc_stats(dev, { netns = ns }))) do out[#out + 1] = st.kind .. '@' .. st.parent end
  table.sort(out)
  return table.concat(out, ' ')
end

describe('qoslab cleanup of netem #netem', function()
  local dir, ns
  before_each(function()
    dir = os.tmpname(); os.remove(dir)
    must('mkdir -p ' .. q(dir .. '/state'))
    ns = netns.unique_name('qlci')
    assert(netns.add(ns))
    must('ip -n ' .. ns .. ' link add qlci0 type veth peer name qlci1')
    must('ip -n ' .. ns .. ' link set qlci0 up && ip -n ' .. ns .. ' link set qlci1 up')
  end)
  after_each(function()
    if netns.exists(ns) then netns.delete(ns) end
    os.execute('rm -rf ' .. q(dir))
  end)

  local function cleanup()
    return must('env QOSLAB_STATE_DIR=' .. q(dir .. '/state') .. ' QOSLAB_BUILD=' .. q(build)
      .. ' lua5.4 ' .. q(checkout .. '/bin/qoslab') .. ' cleanup')
  end

  it('leaves a user\'s root netem and a netem under the user\'s htb', function()
    must('tc -n ' .. ns .. ' qdisc add dev qlci0 root netem delay 5ms')
    must('tc -n ' .. ns .. ' qdisc add dev qlci1 root handle 1: htb default 10')
    must('tc -n ' .. ns .. ' class add dev qlci1 parent 1: classid 1:10 htb rate 10mbit')
    must('tc -n ' .. ns .. ' qdisc add dev qlci1 parent 1:10 netem delay 5ms')
    local f = assert(io.open(dir .. '/state/999990.jsonl', 'w'))
    f:write(cjson.encode { op = 'add', id = 1, kind = 'qdisc', ifname = 'qlci0', netns = ns, parent = 'root' }, '\n')
    f:write(cjson.encode { op = 'add', id = 2, kind = 'qdisc', ifname = 'qlci1', netns = ns, parent = '1:10' }, '\n')
    f:close()
    local out = cleanup()
    assert.matches('qoslab cleanup: 0 removed, 0 already gone, 2 skipped\n', out, 1, true)
    assert.equal('netem@root', kinds(ns, 'qlci0'))
    assert.equal('htb@root netem@1:10', kinds(ns, 'qlci1'))
  end)

  it('removes a killed run\'s root and ingress netem, not a netem the user put there after', function()
    local script = dir .. '/killed.lua'
    local f = assert(io.open(script, 'w'))
    f:write(string.format([[
      local netem = require 'qoslab.netem'
      assert(netem.apply('qlci0', {delay_ms = 1}, {netns = %q, quiet = true}))
      assert(netem.apply('qlci1', {delay_ms = 1}, {netns = %q, quiet = true}))
      assert(netem.apply('qlci1', {delay_ms = 2}, {netns = %q, direction = 'ingress', quiet = true}))
      require('qoslab.core').kill(require('qoslab.netns')._pid(), 'KILL')
    ]], ns, ns, ns))
    f:close()
    sh('cd ' .. q(checkout) .. ' && QOSLAB_STATE_DIR=' .. q(dir .. '/state')
      .. ' lua5.4 -e "package.path=\'./lua/?.lua;\'..package.path package.cpath=\'./' .. build
      .. '/?.so;\'..package.cpath" ' .. q(script))
    assert.matches('ingress', kinds(ns, 'qlci1'))
    -- The user replaces the root netem on qlci0 with their own.
    must('tc -n ' .. ns .. ' qdisc del dev qlci0 root')
    must('tc -n ' .. ns .. ' qdisc add dev qlci0 root handle 5: netem delay 7ms')
    local out = cleanup()
    assert.matches('skipped (not the one qoslab made: handle is 5:, qoslab recorded ', out, 1, true)
    assert.matches('removed %a+ qdisc on qlci1 in netns ' .. ns:gsub('%p', '%%%0'), out)
    -- The ingress (its ifb goes with it: then 'gone already'), qlci1's root; qlci0's is the user's.
    assert.matches('qoslab cleanup: 2 removed, 1 already gone, 1 skipped\n', out, 1, true)
    assert.equal('netem@root', kinds(ns, 'qlci0'))
    assert.is_nil(kinds(ns, 'qlci1'):find('netem', 1, true))
    assert.is_nil(kinds(ns, 'qlci1'):find('ingress', 1, true))
    assert.same({}, (require('qoslab.fs').list(dir .. '/state')))
  end)
end)
