-- 020: plot paths from the first new-user trial. `--out '/tmp/x/100%loss'`
-- raised "invalid use of '%' in replacement string" (the data file's path
-- was a gsub replacement) and "%0" in a path silently became another path;
-- a newline in the path broke the .gp script's header comment; a relative
-- path starting with "-" reached gnuplot as an option; a folder that could
-- not be written was reported as EACCES whatever the reason.
local plot = require 'qoslab.plot'

local function slurp(path)
  local f = io.open(path, 'rb')
  if not f then return nil end
  local s = f:read('a')
  f:close()
  return s
end

local SERIES = { { title = 's', points = { { 1, 2 }, { 2, 3 } } } }

describe('regress 020 plot paths', function()
  local dir
  before_each(function()
    local p = assert(io.popen('mktemp -d /tmp/qoslab-r020.XXXXXX'))
    dir = p:read('l'); p:close()
  end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it('takes "%" and "%0" in a path as characters', function()
    for _, name in ipairs { '100%loss', 'a%0b', '%1%%' } do
      local files, msg = plot.lines { out = dir .. '/' .. name, series = SERIES }
      assert.is_table(files, msg)
      assert.equal(dir .. '/' .. name .. '.png', files.png)
      assert.is_true(#assert(slurp(files.png)) > 2000)
      assert.matches("plot '" .. (dir .. '/' .. name .. '.dat'):gsub('%p', '%%%0') .. "'", slurp(files.gp))
    end
    local summary = require('qoslab.plan').sweep { name = 'w', progress = false,
      params = { delay_ms = { 10, 100 } }, run = function(p) return 1e6 / p.delay_ms end }
    local sl = assert(plot.sweep_lines(summary, { out = dir .. '/sw%0', x = 'delay_ms' }))
    assert.equal(dir .. '/sw%0.png', sl.png)
  end)

  it('renders a path with a newline, and a relative one starting with "-"', function()
    local files, msg = plot.lines { out = dir .. '/two\nlines', series = SERIES }
    assert.is_table(files, msg)
    assert.is_true(#assert(slurp(dir .. '/two\nlines.png')) > 2000)
    local first = slurp(files.gp):match('^[^\n]*')
    assert.equal('# qoslab plot script: gnuplot ' .. dir .. '/two\\010lines.gp', first)
    -- The child is a plain lua5.4, which loads only the plain build's module
    -- (a sanitizer build's needs its runtime first, which only our test host has).
    local script = dir .. '/dash.lua'
    local cwd = require('qoslab.fs').cwd()
    local f = assert(io.open(script, 'w'))
    f:write(string.format([[
package.path = %q .. package.path
package.cpath = %q .. package.cpath
local series = { { title = 's', points = { { 1, 2 }, { 2, 3 } } } }
local files, msg = require('qoslab.plot').lines { out = '-dash', series = series }
io.write(files and files.png or msg)
]], cwd .. '/lua/?.lua;', cwd .. '/build/?.so;'))
    f:close()
    local p = assert(io.popen("cd '" .. dir .. "' && lua5.4 dash.lua 2>&1"))
    local out = p:read('a'); p:close()
    assert.equal('-dash.png', out)
    assert.is_true(#assert(slurp(dir .. '/-dash.png')) > 2000)
  end)

  it('names the reason a file cannot be written, with its code', function()
    assert(io.open(dir .. '/afile', 'w')):close()
    local files, msg, code = plot.lines { out = dir .. '/afile/sub/x', series = SERIES }
    assert.is_nil(files)
    assert.equal('ENOTDIR', code)
    assert.matches('Not a directory', msg, 1, true)
    files, msg, code = plot.lines { out = dir .. '/' .. ('n'):rep(300), series = SERIES }
    assert.is_nil(files)
    assert.equal('ENAMETOOLONG', code)
    assert.matches('File name too long', msg, 1, true)
  end)
end)
