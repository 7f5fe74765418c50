-- 027: `qoslab run`'s exit statuses did not match manual/cli.md, which said
-- 1 = a failure of the world and 2 = bad input: a caller's mistake inside a
-- plan (a qoslab function refusing its argument) exited 1, and a missing
-- plan file (ENOENT, a failure to read) exited 2. The code keeps its model
-- (2 = bad input to the command: flags, arguments, --out, a plan file that
-- cannot be read or compiled; 1 = the command failed: a failure of the
-- world or any error the plan raised), and the manual now says so. This
-- runs each case and checks that the manual's row for the status seen
-- names it.
local function slurp(path)
  local f = io.open(path, 'r')
  if not f then return nil end
  local s = f:read('a')
  f:close()
  return s
end

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- The manual's exit status table: status -> meaning.
local function rows()
  local t = {}
  local text = assert(slurp('manual/cli.md'))
  local sec = assert(text:match('## Exit status and signals\n(.-)\n## ') or
    text:match('## Exit status and signals\n(.*)$'))
  for st, meaning in sec:gmatch('\n| (%d+) | ([^\n]*) |') do t[tonumber(st)] = meaning end
  return t
end

-- The command as a user runs it: the plain build (a sanitizer build's
-- module loads only into the suites' own Lua host, not into bin/qoslab).
local function run(dir, args)
  local p = assert(io.popen(string.format('env -u QOSLAB_BUILD bin/qoslab %s >%s 2>%s; echo $?', args,
    q(dir .. '/out'), q(dir .. '/err'))))
  local rc = tonumber(p:read('l'))
  p:close()
  return rc, slurp(dir .. '/err') or ''
end

describe('regress 027 qoslab run exits as manual/cli.md says', function()
  local dir
  before_each(function()
    local p = assert(io.popen('mktemp -d'))
    dir = p:read('l')
    p:close()
  end)
  after_each(function() os.execute('rm -rf ' .. q(dir)) end)

  it('a missing plan file: 2, a plan file that cannot be read', function()
    local rc, err = run(dir, 'run ' .. q(dir .. '/none.lua'))
    assert.equal(2, rc, err)
    assert.matches('(ENOENT)', err, 1, true)
    local m = assert(rows()[2], 'no row for 2')
    assert.matches('plan file that cannot be read or compiled', m, 1, true)
    assert.matches('ENOENT', m, 1, true)
  end)

  it("a caller's mistake inside a plan: 1, an error the plan raised", function()
    local f = assert(io.open(dir .. '/bad.lua', 'w'))
    f:write("qoslab.netem.check { loss_pct = 150 }\n")
    f:close()
    local rc, err = run(dir, 'run ' .. q(dir .. '/bad.lua'))
    assert.equal(1, rc, err)
    assert.matches('bad.lua:1: qoslab.netem.check: spec.loss_pct: expected', err, 1, true)
    local m = assert(rows()[1], 'no row for 1')
    assert.matches('an error the plan raised', m, 1, true)
    assert.matches("a qoslab function refusing a caller's mistake", m, 1, true)
  end)

  it('an unknown flag: 2, bad input to the command', function()
    local rc, err = run(dir, 'run --no-such-flag x.lua')
    assert.equal(2, rc, err)
    assert.matches('unknown flag', assert(rows()[2]), 1, true)
  end)
end)
