-- spec/support/run-netem.sh (`make check-netem`) counts honestly: a machine
-- that cannot run a guest is a skip of every guest spec file, with the reason
-- printed; a spec that fails in the guest is a failure, never a skip.
local function sh(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1', 'r'))
  local out = p:read('a')
  local ok, _, code = p:close()
  return ok == true, out, code
end

local function tmpdir()
  local ok, out = sh('mktemp -d /tmp/qoslab-netemspec.XXXXXX')
  assert(ok, out)
  return (out:gsub('\n$', ''))
end

local function read(path)
  local f = assert(io.open(path, 'r'))
  local s = f:read('a')
  f:close()
  return s
end

local function write(path, s)
  local f = assert(io.open(path, 'w'))
  f:write(s)
  f:close()
end

describe('make check-netem (run-netem.sh)', function()
  it('counts every guest spec file as skipped, with the reason, when no kernel can be had', function()
    local d = tmpdir()
    finally(function() sh('rm -rf ' .. d) end)
    write(d .. '/a_spec.lua', "it('x', function() end)\n")
    write(d .. '/b_spec.lua', "it('y', function() end)\n")
    local ok, out = sh('QOSLAB_COUNTS_DIR=' .. d .. ' QOSLAB_NETEM_DIRS=' .. d
      .. ' QOSLAB_VM_CACHE=' .. d .. '/cache QOSLAB_VM_KERNEL_DEB=/nonexistent/linux-image.deb'
      .. ' sh spec/support/run-netem.sh')
    assert.is_true(ok, out)
    assert.is_truthy(out:find('SKIPPED 2 spec file(s)', 1, true), out)
    assert.is_truthy(out:find('unavailable: ENOENT: QOSLAB_VM_KERNEL_DEB=/nonexistent/linux-image.deb', 1, true), out)
    assert.are.equal('0 0 2\n', read(d .. '/netem.txt'))
  end)

  local avail = require('qoslab.vm').available()
  local boot_it = avail and it or function(name) pending(name .. ' (no guest here)') end

  boot_it('reports a failing guest spec as a failure with the guest counts', function()
    local d = tmpdir()
    finally(function() sh('rm -rf ' .. d) end)
    write(d .. '/x_spec.lua', [[
describe('in the guest', function()
  it('passes', function() assert.are.equal('1', os.getenv('QOSLAB_IN_VM')) end)
  it('fails', function() assert.are.equal(1, 2) end)
end)
]])
    local ok, out, code = sh('QOSLAB_COUNTS_DIR=' .. d .. ' QOSLAB_NETEM_DIRS=' .. d
      .. ' sh spec/support/run-netem.sh')
    assert.is_false(ok, out)
    assert.is_truthy(code ~= 0)
    assert.is_nil(out:find('SKIPPED', 1, true), out)
    assert.are.equal('1 1 0\n', read(d .. '/netem.txt'))
    -- the read-write share of the run is gone
    local _, left = sh('ls -d build/netem-run.* 2>/dev/null')
    assert.is_nil(left:match('netem%-run%.%d+%.'), left)
  end)
end)
