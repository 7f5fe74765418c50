-- qoslab.fs: directories through LuaFileSystem, the system calls Lua lacks
-- through qoslab.core, programs by argv with no shell in between.
local fs = require 'qoslab.fs'

local function read(path)
  local f = assert(io.open(path, 'r'))
  local s = f:read('a')
  f:close()
  return s
end

describe('qoslab.fs', function()
  local dir
  before_each(function()
    dir = os.tmpname(); os.remove(dir)
  end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it('mkdir_p makes parents, says whether it made anything, refuses a file in the way', function()
    local deep = dir .. "/a b/it's $(here)/c"
    assert.is_true(fs.mkdir_p(deep))
    assert.is_true(fs.is_dir(deep))
    assert.is_false(fs.mkdir_p(deep))
    assert(io.open(dir .. '/file', 'w')):close()
    assert.is_true(fs.is_file(dir .. '/file'))
    local ok, msg, code = fs.mkdir_p(dir .. '/file/sub')
    assert.is_nil(ok)
    assert.equal('ENOTDIR', code)
    assert.matches('is a file', msg, 1, true)
    assert.same({ nil, 'not a usable directory name: "x\\0y"', 'EINVAL' }, { fs.mkdir_p('x\0y') })
  end)

  it('list is sorted without . and ..; rmdir_if_empty removes only an empty folder', function()
    assert(fs.mkdir_p(dir .. '/d'))
    assert(io.open(dir .. '/b', 'w')):close()
    assert(io.open(dir .. '/a;ls', 'w')):close()
    assert.same({ 'a;ls', 'b', 'd' }, fs.list(dir))
    assert.equal('ENOENT', select(3, fs.list(dir .. '/none')))
    assert.is_false(fs.rmdir_if_empty(dir))
    assert.is_true(fs.rmdir_if_empty(dir .. '/d'))
    assert.is_nil(fs.kind(dir .. '/d'))
  end)

  it('run passes arguments as they are, sends output to a file, reports status and signal', function()
    assert(fs.mkdir_p(dir))
    local how, n = fs.run({ '/bin/echo', "$(id)", "a'b", '`x`;y' }, { cwd = dir, output = dir .. '/out' })
    assert.same({ 'exit', 0 }, { how, n })
    assert.equal("$(id) a'b `x`;y\n", read(dir .. '/out'))
    assert.same({ 'exit', 3 }, { fs.run({ '/bin/sh', '-c', 'exit 3' }) })
    assert.same({ 'signal', 9 }, { fs.run({ '/bin/sh', '-c', 'kill -9 $$' }) })
    local ok, msg, code = fs.run({ 'qoslab-no-such-program' })
    assert.is_nil(ok)
    assert.equal('ENOENT', code)
    assert.matches('qoslab-no-such-program', msg, 1, true)
    assert.error_matches(function() fs.run({ 'echo', 'a\0b' }) end, 'argv%[2%]: expected a string without NUL')
  end)

  it('run ends early on SIGINT to this process (system(3) would ignore it while it waits)', function()
    assert(fs.mkdir_p(dir))
    local script = dir .. '/intr.lua'
    local f = assert(io.open(script, 'w'))
    f:write(string.format([[
package.path = %q .. package.path
package.cpath = %q .. package.cpath
local fs, timer = require 'qoslab.fs', require 'qoslab.timer'
local t0 = timer.now()
local ok, err = pcall(fs.run, { 'sleep', '5' })
io.write(tostring(ok), ' ', tostring(err):match('interrupted') or tostring(err), string.format(' %%.2f', timer.now() - t0))
]], fs.cwd() .. '/lua/?.lua;', fs.cwd() .. '/' .. (os.getenv('QOSLAB_BUILD') or 'build') .. '/?.so;'))
    f:close()
    local p = assert(io.popen("lua5.4 '" .. script .. "' & sleep 0.3; kill -INT $!; wait"))
    local out = p:read('a')
    p:close()
    local ok, why, secs = out:match('^(%a+) (%a+) ([%d%.]+)$')
    assert.equal('false', ok, out)
    assert.equal('interrupted', why, out)
    assert(tonumber(secs) < 2, 'fs.run waited ' .. secs .. ' s for a 5 s child after SIGINT')
  end)

  it('fsync, realpath, cwd, which, kill and uname_a', function()
    assert(fs.mkdir_p(dir .. '/x'))
    assert(io.open(dir .. '/x/f', 'w')):close()
    assert.is_true(fs.fsync(dir .. '/x/f'))
    assert.equal('ENOENT', select(3, fs.fsync(dir .. '/x/none')))
    local real = fs.realpath(dir .. '/x/../x/f')
    assert.equal(fs.realpath(dir) .. '/x/f', real)
    assert.equal(fs.realpath('.'), fs.cwd())
    assert.equal('/bin/sh', (fs.which('sh'):gsub('^/usr', '')))
    assert.is_nil(fs.which('qoslab-no-such-program'))
    assert.is_true(fs.kill(fs.realpath('/proc/self') and tonumber(fs.realpath('/proc/self'):match('%d+')), 0))
    assert.equal('ESRCH', select(3, fs.kill(4194311, 0)))
    local u = fs.uname_a()
    local release = read('/proc/sys/kernel/osrelease'):gsub('%s+$', '')
    assert.matches('^Linux %S+ ' .. release:gsub('%p', '%%%0') .. ' ', u)
  end)
end)
