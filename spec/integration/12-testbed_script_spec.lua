-- `bin/qoslab run examples/testbed_rate.lua` builds a
-- rate-limited testbed, reads the limit back and leaves nothing behind. Run
-- as a subprocess, as a user would; `ip netns list` and `ip -o link` are
-- compared before and after, and the run's qoslab.state file must be gone.
-- Other processes on this machine (parallel test runs) may create and remove
-- their own qoslab namespaces meanwhile: entries named after another live
-- process are left out of the comparison, nothing else is.
local function sh(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1'))
  local out = p:read('a')
  local ok, _, code = p:close()
  return out, ok and code == 0
end

-- The pid a qoslab name belongs to: namespaces PREFIX-PID-N[-c|-s], testbed
-- veth ends q[cs]PIDnN.
local function owner(name)
  return tonumber(name:match('^[%w_%.]-%-(%d+)%-%d+') or name:match('^q[cs](%d+)n%d+'))
end

local function alive(pid)
  local f = io.open('/proc/' .. pid .. '/stat')
  if f then f:close() end
  return f ~= nil
end

local function snapshot(child)
  local set = {}
  local out = sh('ip netns list; ip -o link show')
  for line in out:gmatch('[^\n]+') do
    local name = line:match('^(%S+)') or line
    name = name:gsub(':$', '')
    if name:match('^%d+$') then name = line:match('^%d+: ([^:@ ]+)') end
    local pid = owner(name)
    if not (pid and pid ~= child and alive(pid)) then set[name] = true end
  end
  return set
end

describe('bin/qoslab run examples/testbed_rate.lua', function()
  it('prints the limit read back from the kernel and leaves nothing behind', function()
    local tmp = os.tmpname()
    os.remove(tmp)
    local dir = tmp .. '/state'
    assert(os.execute('mkdir -p ' .. dir .. ' ' .. tmp .. '/cwd'))
    finally(function() os.execute('rm -rf ' .. tmp) end)
    local top = assert(io.popen('pwd')):read('l')
    local before = snapshot()
    -- `exec` keeps the shell's pid for lua, so names made by the run carry it.
    -- Run from a scratch directory: `qoslab run` may make a results folder there.
    local out, ok = sh('echo pid $$; cd ' .. tmp .. '/cwd && QOSLAB_STATE_DIR=' .. dir ..
      ' exec lua5.4 ' .. top .. '/bin/qoslab run ' .. top .. '/examples/testbed_rate.lua')
    assert(ok, out)
    local pid = tonumber(out:match('^pid (%d+)'))
    local a = '10%.(%d+)%.(%d+)%.1'
    local x, y = out:match(a)
    assert.equal(pid % 250 + 1, tonumber(x))
    -- (the script writes no files: the results folder made for it goes again)
    assert.matches('\n10%.' .. x .. '%.' .. y .. '%.1 %-> 10%.' .. x .. '%.' .. y .. '%.2: tbf 100000000 bit/s\n'
      .. 'qoslab run: nothing was written; removed the empty results/testbed_rate%-[%d%-]+\n$', out)
    assert.is_nil(io.open(tmp .. '/cwd/results/' .. (out:match('results/(testbed_rate%-[%d%-]+)') or 'x')))
    local after = snapshot(pid)
    -- Same entries (other live processes' aside) and none of the run's.
    assert.same(before, after)
    for name in pairs(after) do assert.is_not.equal(pid, owner(name), name) end
    assert.equal('', (sh('ls -A ' .. dir)))
  end)
end)
