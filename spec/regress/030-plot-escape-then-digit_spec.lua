-- 030: a plot title with a line break (the sweep plots' second line, "... →
-- 10.9.0.2 · backend host") is written as a double-quoted gnuplot string with
-- octal escapes. Digits were left bare, and gnuplot reads an escape's octal
-- digits on past three: "to\04010.9.0.2" became one code point and the
-- heat map showed a glyph the size of the picture instead of the title.
local gnuplot = require 'qoslab.plot.gnuplot'

describe('regress 030 plot string escapes', function()
  it('gnuplot reads back the exact text of a string with line breaks and digits', function()
    local path = gnuplot.gnuplot()
    assert.is_string(path)
    local text = 'TCP vs delay\nclient → 10.9.0.2 · 100 ms, 5 % loss\t(run 7)'
    local lit = gnuplot.gq(text)
    assert.is_nil(lit:find('\\%d%d%d%d'), 'a digit right after an escape: ' .. lit)
    local tmp = os.tmpname()
    local p = assert(io.popen(string.format("'%s' -e %s 2>%s", path,
      ("'set print \"-\"; print " .. lit:gsub("'", "'\\''") .. "'"), tmp)))
    local out = p:read('a')
    p:close()
    os.remove(tmp)
    assert.equal(text .. '\n', out)
  end)
end)
