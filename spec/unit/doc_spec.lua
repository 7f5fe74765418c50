-- The reference (config.ld, read by `make doc`) covers every Lua module a
-- script can require: a module missing from its `file` list would leave
-- public functions out of doc/ without a warning, and a listed file or topic
-- that is gone makes ldoc stop. The command-line modules (qoslab.cli*) are not
-- an API and stay out. Also: the README points at topics that exist, and it
-- cites no document that is not in the repository.
--
-- And the HTML ldoc writes says what the source says. A placeholder written
-- bare in a comment or topic (`"<ctx>: spec.<field>: expected ..."` without
-- its backquotes) reached the browser as an unknown tag, which it hides:
-- netem.check's Raises read ": spec.: expected ...". A code span holding
-- another (`{... `delay_ms = 100` ...}`) came out inverted, the inner words
-- as prose between two code spans. A list item continued by a line indented
-- four spaces became a code block, its backquotes printed as they are.
local lfs = require 'lfs'

local function read(path)
  local f = assert(io.open(path, 'r'))
  local s = f:read('a')
  f:close()
  return s
end

local function config()
  local env = {}
  local chunk = assert(load(read('config.ld'), 'config.ld', 't', env))
  chunk()
  return env
end

-- Every .lua file under dir, as paths from the checkout.
local function lua_files(dir, out)
  out = out or {}
  for name in lfs.dir(dir) do
    if name ~= '.' and name ~= '..' then
      local path = dir .. '/' .. name
      local mode = lfs.attributes(path, 'mode')
      if mode == 'directory' then
        lua_files(path, out)
      elseif name:match('%.lua$') then
        out[#out + 1] = path
      end
    end
  end
  table.sort(out)
  return out
end

local function is_cli(path)
  return path:match('^lua/qoslab/cli[_/%.]') ~= nil
end

describe('the reference (config.ld)', function()
  local cfg = config()

  it('lists every module but the command line, and only files that exist', function()
    local listed = {}
    for _, f in ipairs(cfg.file) do
      assert(lfs.attributes(f, 'mode') == 'file', 'config.ld lists ' .. f .. ', which is not a file')
      listed[f] = true
    end
    for _, f in ipairs(lua_files('lua/qoslab')) do
      if not is_cli(f) then
        assert(listed[f], f .. ' is a module but not in config.ld\'s file list')
      end
    end
  end)

  it('has topics that exist, each named in the README', function()
    local readme = read('README.md')
    assert.is_true(#cfg.topics > 0)
    for _, t in ipairs(cfg.topics) do
      assert(lfs.attributes(t, 'mode') == 'file', 'config.ld lists topic ' .. t .. ', which is not a file')
      assert(readme:find(t, 1, true), 'the README does not name the topic ' .. t)
    end
  end)

  it('writes to doc/, which git ignores', function()
    assert.equal('doc', cfg.dir)
    local ignored = false
    for line in read('.gitignore'):gmatch('[^\n]+') do
      if line == 'doc/' or line == '/doc/' then ignored = true end
    end
    assert.is_true(ignored)
  end)
end)

describe('README and topics', function()
  it('cite no case, issue or note outside the repository', function()
    local files = { 'README.md' }
    for _, t in ipairs(config().topics) do files[#files + 1] = t end
    for _, f in ipairs(files) do
      local s = read(f):lower()
      for _, pat in ipairs { 'case %d%d%d', 'traffic%-contract', 'shared/', 'design%.md', 'issue %d+ point' } do
        assert(not s:find(pat), f .. ' cites something outside the repository: ' .. pat)
      end
    end
  end)
end)

-- HTML elements ldoc and discount write; any other tag is text the browser
-- would swallow.
local HTML_TAGS = {}
for t in ([[a b big blockquote body br code dd div dl dt em h1 h2 h3 h4 h5 h6 head hr
  html i img li link meta ol p pre span strong sub sup table tbody td th thead title tr
  ul]]):gmatch('%S+') do HTML_TAGS[t] = true end

-- The reference of this checkout, written by ldoc to a fresh directory:
-- { [path under it] = html }.
local function build_reference()
  local dir = os.tmpname()
  os.remove(dir)
  local cmd = string.format('ldoc --fatalwarnings -q -d %s . 2>&1', dir)
  local p = assert(io.popen(cmd, 'r'))
  local log = p:read('a')
  local ok = p:close()
  local pages = {}
  local function walk(d, rel)
    for name in lfs.dir(d) do
      if name ~= '.' and name ~= '..' then
        local path, r = d .. '/' .. name, rel .. name
        if lfs.attributes(path, 'mode') == 'directory' then
          walk(path, r .. '/')
        else
          if name:match('%.html$') then pages[r] = read(path) end
          os.remove(path)
        end
      end
    end
    lfs.rmdir(d)
  end
  if lfs.attributes(dir, 'mode') == 'directory' then walk(dir, '') end
  return ok, log, pages
end

local function line_of(html, pos)
  local n = 1
  for _ in html:sub(1, pos):gmatch('\n') do n = n + 1 end
  return n
end

describe('the generated reference (ldoc)', function()
  local have_ldoc = os.execute('command -v ldoc >/dev/null 2>&1')
  if not have_ldoc then
    pending('ldoc is not installed (make doc installs it)')
    return
  end
  local ok, log, pages = build_reference()

  it('builds without a warning', function()
    assert(ok, 'ldoc --fatalwarnings failed:\n' .. log)
    assert.is_not_nil(pages['index.html'])
  end)

  it('has no placeholder left as a bare <word> tag', function()
    local bad = {}
    for path, html in pairs(pages) do
      for pos, name in html:gmatch('()</?([%a_][%w_%-]*)') do
        if not HTML_TAGS[name:lower()] then
          bad[#bad + 1] = string.format('%s:%d: <%s>', path, line_of(html, pos), name)
        end
      end
    end
    table.sort(bad)
    assert(#bad == 0, 'unescaped placeholders (write them in a code span):\n' .. table.concat(bad, '\n'))
  end)

  it('has no inverted or broken code spans', function()
    local bad = {}
    for path, html in pairs(pages) do
      -- prose glued to code on both sides: `a `b` c` read as two spans
      for pos, between in html:gmatch('</code>()([^<]*)<code>') do
        if between:match('^[%w_]') and between:match('[%w_]$') then
          bad[#bad + 1] = string.format('%s:%d: inverted code span around "%s"',
            path, line_of(html, pos), between)
        end
      end
      -- a backquote that reached the page: outside <pre> it is an unpaired
      -- one; in an API page's <pre> (a Lua example) it is prose that became
      -- a code block (a topic may quote a message that holds backquotes)
      local api = path:match('^modules/') or path:match('^classes/')
      local rest = html:gsub('<pre.-</pre>', function(block)
        if api and block:find('`', 1, true) then
          bad[#bad + 1] = string.format('%s: backquotes in a code block: %s', path,
            (block:gsub('<[^>]*>', ''):match('[^\n]*`[^\n]*')))
        end
        return ''
      end)
      local pos = rest:find('`', 1, true)
      if pos then
        bad[#bad + 1] = string.format('%s: an unpaired backquote: %s', path,
          rest:sub(math.max(1, pos - 40), pos + 40))
      end
    end
    table.sort(bad)
    assert(#bad == 0, table.concat(bad, '\n'))
  end)

  it('links no standard type to the Lua 5.1 manual', function()
    for path, html in pairs(pages) do
      assert(not html:find('lua.org/manual/5.1', 1, true), path .. ' links the Lua 5.1 manual')
    end
  end)
end)
