--- HTML pieces of the report pages: escaping, tables, the page frame.
--
-- Every string that goes into a page passes through `escape` (text and
-- attribute values alike: `&`, `<`, `>`, `"` and `'` become entities, and
-- control bytes other than tab and newline are dropped), and every link is
-- a relative path made by `href` (each path segment percent-encoded), so a
-- file or folder name cannot end an attribute or start a tag. The pages are
-- self-contained: inline CSS, no fonts, scripts or images from elsewhere.
-- @module qoslab.report.html
local M = {}

local ENT = { ['&'] = '&amp;', ['<'] = '&lt;', ['>'] = '&gt;', ['"'] = '&quot;', ["'"] = '&#39;' }

--- Text as HTML (for element content and attribute values).
-- @param s any value (tostring'd; nil gives "")
-- @treturn string
-- @usage html.escape('a < b') --> "a &lt; b"
function M.escape(s)
  if s == nil then return '' end
  s = tostring(s)
  -- Invalid UTF-8 would be shown as replacement characters at best: keep
  -- the valid text and write each stray byte as "\xNN".
  if not utf8.len(s) then
    local out, i = {}, 1
    while i <= #s do
      local ok, c = pcall(utf8.codepoint, s, i)
      if ok then
        local ch = utf8.char(c)
        out[#out + 1] = ch
        i = i + #ch
      else
        out[#out + 1] = string.format('\\x%02X', s:byte(i))
        i = i + 1
      end
    end
    s = table.concat(out)
  end
  return (s:gsub('[\0-\8\11-\31\127]', ''):gsub('[&<>"\']', ENT))
end

--- A relative path as an href value: each segment percent-encoded (all but
-- letters, digits and `-._~`), "/" kept; escaped for an attribute.
-- @tparam string path relative path ("plots/a b.png")
-- @treturn string
-- @usage html.href('a b.png') --> "a%20b.png"
function M.href(path)
  local parts = {}
  for seg in (tostring(path) .. '/'):gmatch('([^/]*)/') do
    parts[#parts + 1] = seg:gsub('[^%w%-%._~]', function(c) return string.format('%%%02X', c:byte()) end)
  end
  -- ":" is encoded too, so no first segment reads as a URL scheme.
  return M.escape(table.concat(parts, '/'))
end

--- A table as HTML.
-- @tparam table t `{title =, columns = {string | {name =, header =}, ...},
--   rows = {row, ...}}` (as `qoslab.report.format_table` takes: a row is a
--   list by column position or a map by column name); cells through
--   `qoslab.report.cell_text`
-- @treturn string a `<table>` (with a `<caption>` when t has a title)
function M.table(t)
  local cell_text = require('qoslab.report').cell_text
  local out = { '<table>' }
  if t.title then out[#out + 1] = '<caption>' .. M.escape(t.title) .. '</caption>' end
  out[#out + 1] = '<thead><tr>'
  local cols = {}
  for i, c in ipairs(t.columns) do
    if type(c) == 'string' then c = { name = c } end
    cols[i] = c
    out[#out + 1] = '<th>' .. M.escape(c.header or c.name) .. '</th>'
  end
  out[#out + 1] = '</tr></thead><tbody>'
  for _, row in ipairs(t.rows) do
    out[#out + 1] = '<tr>'
    for i, c in ipairs(cols) do
      local v = row[i]
      if v == nil then v = row[c.name] end
      -- Numbers right-aligned (digits under digits), text left.
      local num = type(v) == 'number'
        or (type(v) == 'string' and v:find('%d') ~= nil and v:match('^[%d%.%-+ ±e]+$') ~= nil)
      out[#out + 1] = (num and '<td class="n">' or '<td>') .. M.escape(cell_text(v)) .. '</td>'
    end
    out[#out + 1] = '</tr>'
  end
  out[#out + 1] = '</tbody></table>'
  return table.concat(out)
end

--- Key/value pairs as a two-column table.
-- @tparam table pairs `{{name, value}, ...}` in order; a nil value leaves its row out
-- @treturn string
function M.pairs_table(pairs)
  local out = { '<table class="kv"><tbody>' }
  for _, p in ipairs(pairs) do
    if p[2] ~= nil then
      out[#out + 1] = '<tr><th>' .. M.escape(p[1]) .. '</th><td>'
        .. M.escape(require('qoslab.report').cell_text(p[2])) .. '</td></tr>'
    end
  end
  out[#out + 1] = '</tbody></table>'
  return table.concat(out)
end

local STYLE = [[
body{font-family:sans-serif;margin:1.5em auto;max-width:1100px;padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ccc}
h3{font-size:1.05em}
table{border-collapse:collapse;margin:.6em 0 1em}
caption{text-align:left;font-weight:bold;padding:.3em 0;white-space:nowrap}
th,td{border:1px solid #ccc;padding:.2em .6em;text-align:left;font-size:.92em}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f0f0f0}
figure{margin:1em 0 2em}figure img{max-width:100%;height:auto;border:1px solid #ddd}
figcaption{font-size:.92em;color:#444}
.note{color:#555;font-size:.92em}.bad{color:#a00;font-weight:bold}
code{background:#f4f4f4;padding:0 .2em}
]]

-- Counts the images that loaded into data attributes of <body> (read by a
-- headless browser) and marks an image that did not load for the reader.
local SCRIPT = [[
window.addEventListener('load', function () {
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++) {
    if (imgs[i].complete && imgs[i].naturalWidth > 0) { ok++; }
    else { imgs[i].insertAdjacentHTML('afterend', '<p class="bad">image did not load: ' +
      imgs[i].getAttribute('src').replace(/[&<>"']/g, '') + '</p>'); }
  }
  document.body.setAttribute('data-images', String(imgs.length));
  document.body.setAttribute('data-images-loaded', String(ok));
});
]]

--- A whole page.
-- @tparam string title page title (text)
-- @tparam string body HTML of the body (already escaped)
-- @treturn string the document
function M.page(title, body)
  return table.concat {
    '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<title>', M.escape(title), '</title>\n<style>', STYLE, '</style>\n',
    '<script>', SCRIPT, '</script></head>\n<body>\n', body, '\n</body></html>\n',
  }
end

return M
