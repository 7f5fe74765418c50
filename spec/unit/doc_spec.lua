-- The reference (config.ld, read by `make doc`) covers every Lua module a
-- script can require: a module missing from its `file` list would leave
-- public functions out of doc/ without a warning, and a listed file or topic
-- that is gone makes ldoc stop. The command-line modules (qoslab.cli*) are not
-- an API and stay out. Also: the README points at topics that exist, and it
-- cites no document that is not in the repository.
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
