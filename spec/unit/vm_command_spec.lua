-- The guest ran `qoslab` as found on PATH: an installed tree started as
-- DIR/bin/qoslab, with DIR/bin not on PATH, failed with "cannot find bin/qoslab
-- or an installed qoslab command (ENOENT)", and with another qoslab earlier on
-- PATH the guest ran that one. Now the guest starts the command this process
-- was started as (interpreter, its options, the script's absolute path).
local cli = require 'qoslab.cli'
local vm = require 'qoslab.vm'
local fs = require 'qoslab.fs'

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
local function slurp(p)
  local f = io.open(p, 'r')
  if not f then return nil end
  local s = f:read('a'); f:close(); return s
end
local function write(p, s, mode)
  local f = assert(io.open(p, 'w')); f:write(s); f:close()
  if mode then assert(os.execute('chmod ' .. mode .. ' ' .. q(p))) end
end

describe('the qoslab command the guest runs', function()
  it('is the interpreter, its options and the absolute script path', function()
    local here = fs.cwd()
    assert.same({ 'lua5.4', here .. '/bin/qoslab' },
      cli.self_command { [-1] = 'lua5.4', [0] = 'bin/qoslab', 'run', 'x.lua' })
    local wrapped = { [-3] = '/usr/bin/lua5.4', [-2] = '-e', [-1] = "package.path='/d/share/lua/5.4/?.lua;'",
                      [0] = '/d/lib/luarocks/rocks-5.4/qoslab/scm-1/bin/qoslab', 'run' }
    assert.same({ '/usr/bin/lua5.4', '-e', "package.path='/d/share/lua/5.4/?.lua;'",
                  '/d/lib/luarocks/rocks-5.4/qoslab/scm-1/bin/qoslab' }, cli.self_command(wrapped))
    assert.is_nil(cli.self_command { 'run', 'x.lua' })
    assert.equal([['lua5.4' '-e' 'x='\''y'\''' '/a b/qoslab']],
      vm._qoslab_command { 'lua5.4', '-e', "x='y'", '/a b/qoslab' })
  end)

  it('is DIR/bin/qoslab when started so, not another qoslab on PATH', function()
    local dir = os.tmpname(); os.remove(dir)
    finally(function() os.execute('rm -rf ' .. q(dir)) end)
    assert(os.execute('mkdir -p ' .. q(dir .. '/tree/bin') .. ' ' .. q(dir .. '/other') .. ' ' .. q(dir .. '/out')))
    -- An "installed tree": bin/qoslab alone, the modules found through LUA_PATH.
    assert(os.execute('cp bin/qoslab ' .. q(dir .. '/tree/bin/qoslab')))
    write(dir .. '/other/qoslab', '#!/bin/sh\necho other qoslab\n', '755')
    -- A harness that records the command it was asked to run in the guest.
    write(dir .. '/harness.sh', '[ "$1" = --check ] && exit 0\nfor a; do last=$a; done\nprintf %s "$last" > '
      .. q(dir .. '/cmd') .. '\n')
    write(dir .. '/plan.lua', 'print("plan")\n')
    local build = os.getenv('QOSLAB_BUILD') or 'build'
    local here = fs.cwd()
    local cmd = 'cd ' .. q(dir) .. ' && env PATH=' .. q(dir .. '/other:/usr/bin:/bin')
      .. ' LUA_PATH=' .. q(here .. '/lua/?.lua;' .. here .. '/lua/?/init.lua;;')
      .. ' LUA_CPATH=' .. q(here .. '/' .. build .. '/?.so;;')
      .. ' QOSLAB_VM_SCRIPT=' .. q(dir .. '/harness.sh')
      .. ' lua5.4 tree/bin/qoslab run plan.lua --guest --out out 2>&1'
    local p = assert(io.popen(cmd)); local out = p:read('a'); p:close()
    local ran = slurp(dir .. '/cmd')
    assert.is_not_nil(ran, out)
    assert.matches("'lua5.4' '" .. (dir .. '/tree/bin/qoslab'):gsub('%p', '%%%0') .. "' run ", ran)
    assert.is_nil(ran:find('other', 1, true))
  end)
end)
