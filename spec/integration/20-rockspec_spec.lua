-- `luarocks make --tree=DIR` installs a working qoslab from the rockspec
-- into an empty tree, with its Lua dependencies (argparse, lua-cjson,
-- dkjson, luafilesystem) resolved by LuaRocks into that tree from a local
-- rocks server built here from Debian's packages (this machine reaches no
-- rocks server); run with LUA_PATH/LUA_CPATH that hold only the tree, so
-- Debian's own lua-argparse and lua-cjson under /usr cannot stand in. The
-- installed CLI runs a loopback test against an installed server, and the
-- installed module reports the rockspec's version.
local H = require 'integration.traffic_helper'

local function sh(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1'))
  local out = p:read('a')
  local ok, _, code = p:close()
  return out, ok and 0 or code
end

local q = H.q

describe('the rockspec', function()
  local tmp
  setup(function()
    tmp = os.tmpname(); os.remove(tmp)
    assert(os.execute('mkdir -p ' .. q(tmp .. '/src')))
  end)
  teardown(function()
    if tmp then os.execute('rm -rf ' .. q(tmp)) end
    H.cleanup_tmp()
  end)

  it('declares its dependencies, C libraries, source and test', function()
    local f = assert(io.open('qoslab-scm-1.rockspec'))
    local text = f:read('a')
    f:close()
    local spec = {}
    assert(load(text, 'rockspec', 't', spec))()
    assert.equal('3.0', spec.rockspec_format)
    assert.same({ 'lua >= 5.4, < 5.5', 'argparse >= 0.6', 'lua-cjson >= 2.1', 'dkjson >= 2.5',
                  'luafilesystem >= 1.7' }, spec.dependencies)
    assert.same({ 'LIBCJSON', 'LIBNL', 'LIBNL_ROUTE' }, (function()
      local t = {}
      for k in pairs(spec.external_dependencies) do t[#t + 1] = k end
      table.sort(t)
      return t
    end)())
    assert.equal('nl-route-3', spec.external_dependencies.LIBNL_ROUTE.library)
    assert.matches('^git%+file:///', spec.source.url)
    assert.equal('command', spec.test.type)
    -- Every module the Lua layers require is a declared dependency or qoslab's own.
    local declared = { argparse = 'argparse', cjson = 'lua-cjson', dkjson = 'dkjson', lfs = 'luafilesystem' }
    local deps = {}
    for _, d in ipairs(spec.dependencies) do deps[d:match('^(%S+)')] = true end
    local out = sh("grep -rho \"require[ (]*'[%w._]*'\" lua/qoslab bin/qoslab | sort -u")
    for mod in out:gmatch("'([%w._]+)'") do
      local top = mod:match('^[^.]+')
      if top ~= 'qoslab' then
        assert(declared[mod] and deps[declared[mod]], 'require "' .. mod .. '" is not a rockspec dependency')
      end
    end
  end)

  it('source.url in its documented local form (git+file of a clone) packs the sources', function()
    if sh('command -v luarocks') == '' then
      error('luarocks is missing: make deps installs it')
    end
    local head = sh('git rev-parse --abbrev-ref HEAD'):gsub('%s+$', '')
    local top = sh('git rev-parse --show-toplevel'):gsub('%s+$', '')
    if head == '' or head == 'HEAD' or top == '' then
      pending('the checkout is not on a git branch (' .. head .. '): nothing to clone')
      return
    end
    local f = assert(io.open('qoslab-scm-1.rockspec'))
    local text = f:read('a')
    f:close()
    -- The clone is this checkout, on its branch, instead of /usr/local/src/qoslab.
    local n1, n2
    text, n1 = text:gsub('url = "git%+file:///[^"]*"', 'url = "git+file://' .. top .. '"')
    text, n2 = text:gsub('branch = "[^"]*"', 'branch = "' .. head .. '"')
    assert.same({ 1, 1 }, { n1, n2 })
    assert(os.execute('mkdir -p ' .. q(tmp .. '/pack')))
    f = assert(io.open(tmp .. '/pack/qoslab-scm-1.rockspec', 'w'))
    f:write(text)
    f:close()
    local out, rc = sh('cd ' .. q(tmp .. '/pack') .. ' && timeout 120 luarocks --lua-version=5.4 pack qoslab-scm-1.rockspec')
    assert.equal(0, rc, out)
    local list = sh('unzip -l ' .. q(tmp .. '/pack/qoslab-scm-1.src.rock'))
    -- The sources sit in a folder named as the clone (qoslab for the rockspec's own url).
    local base = top:match('[^/]+$')
    for _, file in ipairs { 'qoslab-scm-1.rockspec', base .. '/Makefile', base .. '/csrc/bind/core.c', base .. '/bin/qoslab' } do
      assert.matches(' ' .. file:gsub('%p', '%%%0') .. '\n', list)
    end
  end)

  it('without a reachable mirror the local rocks server is not built, and says why (exit 77: skip)', function()
    local out, rc = sh('QOSLAB_DEB_MIRROR=http://127.0.0.1:9/debian sh spec/support/local-rocks.sh '
      .. q(tmp .. '/norocks'))
    assert.equal(77, rc, out)
    assert.matches('^local%-rocks: the Debian mirror http://127%.0%.0%.1:9/debian cannot be reached: Err:1 .*'
      .. 'Connection refused', out)
    assert.is_nil(io.open(tmp .. '/norocks/server/manifest'))
  end)

  it('luarocks make into an empty tree resolves the deps there; the tree alone runs qoslab', function()
    if sh('command -v luarocks') == '' then
      error('luarocks is missing: make deps installs it')
    end
    local out, rc = sh('sh spec/support/local-rocks.sh ' .. q(tmp .. '/rocks'))
    if rc == 77 then
      pending('no local rocks server: ' .. out:gsub('%s+$', ''))
      return
    end
    assert.equal(0, rc, out)
    -- A copy of the sources, so the checkout's build/ is not touched.
    assert(os.execute('cp -r csrc lua bin spec Makefile qoslab-scm-1.rockspec ' .. q(tmp .. '/src/')))
    local tree = tmp .. '/tree'
    out, rc = sh('cd ' .. q(tmp .. '/src') .. ' && luarocks --lua-version=5.4 make --tree=' .. q(tree)
      .. ' --deps-mode=one --only-server=' .. q(tmp .. '/rocks/server') .. ' qoslab-scm-1.rockspec')
    assert.equal(0, rc, out)
    local list = sh('luarocks --lua-version=5.4 --tree=' .. q(tree) .. ' list --porcelain')
    local rocks = {}
    for name in list:gmatch('([%w%-]+)\t[^\n]*\tinstalled\t') do rocks[#rocks + 1] = name end
    table.sort(rocks)
    assert.same({ 'argparse', 'dkjson', 'lua-cjson', 'luafilesystem', 'qoslab' }, rocks)

    -- Only the tree on the Lua paths (no ";;": the default paths, which hold
    -- Debian's /usr/share/lua/5.4 and /usr/lib/x86_64-linux-gnu/lua/5.4, are out).
    local env = string.format('env LUA_PATH=%s LUA_CPATH=%s ',
      q(tree .. '/share/lua/5.4/?.lua;' .. tree .. '/share/lua/5.4/?/init.lua'),
      q(tree .. '/lib/lua/5.4/?.so'))
    out, rc = sh('cd / && ' .. env .. [[lua5.4 -e '
      for _, m in ipairs { "argparse", "dkjson", "qoslab.plan", "qoslab.cli" } do
        io.write(m, "=", package.searchpath(m, package.path) or "?", "\n")
      end
      for _, m in ipairs { "cjson", "lfs", "qoslab.core" } do
        io.write(m, "=", package.searchpath(m, package.cpath) or "?", "\n")
      end
      local q = require "qoslab"
      local plan = require "qoslab.plan"
      io.write(q._VERSION, " ", q.timer.now() > 0 and "ok" or "bad", " ", #plan.product({a = {1, 2}, b = {"x", "y", "z"}}, {"a", "b"}),
        " ", plan.point_key{loss_pct = 1, delay_ms = 50}, "\n")']])
    assert.equal(0, rc, out)
    local f = assert(io.open('qoslab-scm-1.rockspec'))
    local version = f:read('a'):match('\nversion%s*=%s*"([^"]+)"')
    f:close()
    local lp, lc = tree .. '/share/lua/5.4/', tree .. '/lib/lua/5.4/'
    assert.equal(table.concat({
      'argparse=' .. lp .. 'argparse.lua', 'dkjson=' .. lp .. 'dkjson.lua',
      'qoslab.plan=' .. lp .. 'qoslab/plan.lua', 'qoslab.cli=' .. lp .. 'qoslab/cli/init.lua',
      'cjson=' .. lc .. 'cjson.so', 'lfs=' .. lc .. 'lfs.so', 'qoslab.core=' .. lc .. 'qoslab/core.so',
      version .. ' ok 6 delay_ms=50,loss_pct=1', '' }, '\n'), out)
    -- The restriction is real: without the tree, Debian's argparse is not found.
    out, rc = sh('cd / && env LUA_PATH=' .. q(tmp .. '/none/?.lua') .. ' LUA_CPATH=' .. q(tmp .. '/none/?.so')
      .. [[ lua5.4 -e 'require "argparse"']])
    assert.are_not.equal(0, rc)
    assert.matches("module 'argparse' not found", out, 1, true)

    out, rc = sh(env .. q(tree .. '/bin/qoslab') .. ' --version')
    assert.equal(0, rc, out)
    assert.equal('qoslab ' .. version .. '\n', out)

    -- The installed server and client, one second of TCP on loopback.
    local port = H.port()
    local slog = tmp .. '/server.log'
    local pid = H.spawn('cd / && exec ' .. env .. q(tree .. '/bin/qoslab') .. ' server -1 -B 127.0.0.1 -p ' .. port,
      slog, slog)
    finally(function() H.kill(pid) end)
    assert(H.wait_listen(port, nil, 10), 'the installed server did not listen: ' .. (H.read(slog) or ''))
    out, rc = sh('cd / && timeout 30 ' .. env .. q(tree .. '/bin/qoslab') .. ' client 127.0.0.1 -p ' .. port .. ' -t 1')
    assert.equal(0, rc, out)
    -- The summary: one second measured (the later end's clock; a loaded
    -- host stretches it by some ms), both ends' books with bytes moved at
    -- a loopback rate (far above 1 Mbit/s on any host that runs this suite).
    assert.matches('\nduration 1%.0%d s measured\n', out)
    local scale = { [''] = 1, K = 1e3, M = 1e6, G = 1e9 }
    for _, role in ipairs { 'sender   client', 'receiver server' } do
      local secs, rate, unit = out:match('\n%[ +1%] fwd ' .. role .. ' +([%d%.]+) s +[%d%.]+ %a*Bytes +([%d%.]+) (%a?)bits/sec')
      assert(secs, 'no "' .. role .. '" summary line in:\n' .. out)
      assert.equal('1.00', secs)
      assert(tonumber(rate) * scale[unit] > 1e6, role .. ' rate ' .. rate .. ' ' .. unit .. 'bit/s:\n' .. out)
    end
    assert(H.wait_exit(pid, 10), 'the installed server (-1) did not exit after the test: ' .. (H.read(slog) or ''))
  end)
end)
