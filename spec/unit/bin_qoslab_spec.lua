-- bin/qoslab in a fresh clone without `make`: `--version` printed 25 lines
-- of "module 'qoslab.core' not found" (every path searched); now one line
-- says to run make first, exit 1.
local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

describe('bin/qoslab without the C module', function()
  it('says in one line to run make first', function()
    local p = assert(io.popen('QOSLAB_BUILD=/nonexistent-qoslab-build lua5.4 bin/qoslab --version 2>&1; echo "rc=$?"'))
    local out = p:read('a'); p:close()
    assert.equal('qoslab: the C module is not built (no /nonexistent-qoslab-build/qoslab/core.so): '
      .. 'run make in . (the checkout) first\nrc=1\n', out)
  end)

  it('runs when it is built', function()
    local build = os.getenv('QOSLAB_BUILD') or 'build'
    local p = assert(io.popen('QOSLAB_BUILD=' .. q(build) .. ' lua5.4 bin/qoslab --version 2>&1'))
    local out = p:read('a'); p:close()
    assert.matches('^qoslab %S+\n$', out)
  end)
end)
