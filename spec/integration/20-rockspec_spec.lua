-- `luarocks make --tree=DIR` installs a working module from the rockspec
-- (build.type "make": the Makefile is the one source list), and the
-- installed module reports the rockspec's version.
local function sh(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1'))
  local out = p:read('a')
  local ok, _, code = p:close()
  return out, ok and 0 or code
end

describe('the rockspec', function()
  it('luarocks make --tree installs qoslab, its CLI and a loadable core', function()
    if sh('command -v luarocks') == '' then
      error('luarocks is missing: make deps installs it')
    end
    local tmp = os.tmpname(); os.remove(tmp)
    finally(function() os.execute('rm -rf ' .. tmp) end)
    -- A copy of the sources, so the checkout's build/ is not touched.
    assert(os.execute('mkdir -p ' .. tmp .. '/src && cp -r csrc lua bin spec Makefile qoslab-scm-1.rockspec ' .. tmp .. '/src/'))
    local out, rc = sh('cd ' .. tmp .. '/src && luarocks --lua-version=5.4 make --tree=' .. tmp .. '/tree qoslab-scm-1.rockspec')
    assert.equal(0, rc, out)
    local env = string.format('LUA_PATH="%s/tree/share/lua/5.4/?.lua;%s/tree/share/lua/5.4/?/init.lua;;" LUA_CPATH="%s/tree/lib/lua/5.4/?.so;;" ',
      tmp, tmp, tmp)
    out, rc = sh('cd / && ' .. env .. 'lua5.4 -e \'local q = require "qoslab"; io.write(q._VERSION, " ", package.searchpath("qoslab.core", package.cpath), " ", q.timer.now() > 0 and "ok" or "bad")\'')
    assert.equal(0, rc, out)
    local f = assert(io.open('qoslab-scm-1.rockspec'))
    local version = f:read('a'):match('\nversion%s*=%s*"([^"]+)"')
    f:close()
    assert.equal(version .. ' ' .. tmp .. '/tree/lib/lua/5.4/qoslab/core.so ok', out)
    out, rc = sh(tmp .. '/tree/bin/qoslab --version')
    assert.equal(0, rc, out)
    assert.equal('qoslab ' .. version .. '\n', out)
  end)
end)
