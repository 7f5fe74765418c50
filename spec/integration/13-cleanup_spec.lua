-- `qoslab cleanup` removes what a killed run left through qoslab.core's
-- netlink calls, never through `ip`, `tc` or a shell: with `ip`, `tc` and
-- `sh` on PATH replaced by traps, a killed run's namespaces, veth pair and
-- rate limit are still removed; state-file names full of shell syntax are
-- only names (no command runs, a namespace named so is removed); a name with
-- a NUL byte, which C would read as a shorter name, is skipped and the
-- namespace that shorter name denotes survives.
local core = require 'qoslab.core'
local netns = require 'qoslab.netns'

local function sh(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1'))
  local out = p:read('a')
  p:close()
  return out
end

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function exists(path)
  local f = io.open(path, 'r')
  if f then f:close() return true end
  return false
end

-- A folder with `ip`, `tc` and `sh` that only leave a mark, for PATH.
local function trap_dir(dir)
  assert(os.execute('mkdir -p ' .. q(dir .. '/trap')))
  for _, tool in ipairs { 'ip', 'tc', 'sh', 'bash', 'mkdir', 'ls', 'rm' } do
    local f = assert(io.open(dir .. '/trap/' .. tool, 'w'))
    f:write('#!/bin/dash\necho ' .. tool .. ' "$@" >> ' .. q(dir .. '/trap.log') .. '\n')
    f:close()
    assert(os.execute('chmod 755 ' .. q(dir .. '/trap/' .. tool)))
  end
  return dir .. '/trap'
end

-- bin/qoslab cleanup run in dir (a relative `touch pwned` would land there).
local checkout = assert(require('qoslab.fs').cwd())
local function cleanup_cli(dir, trap)
  return sh('cd ' .. q(dir) .. ' && env PATH=' .. q(trap) .. ' QOSLAB_STATE_DIR='
    .. q(dir .. '/state') .. ' /usr/bin/lua5.4 ' .. q(checkout .. '/bin/qoslab') .. ' cleanup')
end

-- What state.lua records as a namespace's identity: nsfs "dev:ino".
local function ns_ident(name)
  local a = assert(require('lfs').attributes('/run/netns/' .. name))
  return { ns = string.format('%d:%d', a.dev, a.ino) }
end

describe('qoslab cleanup', function()
  local dir
  before_each(function()
    dir = os.tmpname(); os.remove(dir)
    assert(os.execute('mkdir -p ' .. q(dir .. '/state')))
  end)
  after_each(function() os.execute('rm -rf ' .. q(dir)) end)

  it('removes a killed run\'s namespaces, veth and shaper with ip/tc/sh trapped', function()
    local script = dir .. '/killed.lua'
    local f = assert(io.open(script, 'w'))
    f:write(string.format([[
      local netns, link, shape = require 'qoslab.netns', require 'qoslab.link', require 'qoslab.shape'
      local a, b = netns.unique_name('qlcu'), netns.unique_name('qlcu')
      assert(netns.add(a)); assert(netns.add(b))
      assert(link.add_veth{name = 'qlcu0', peer = 'qlcu1', netns = a, peer_netns = b})
      assert(shape.apply('qlcu0', {kind = 'tbf', rate_bps = 10000000}, {netns = a}))
      assert(link.add_veth{name = 'qlcu2', peer = 'qlcu3'})
      io.open(%q, 'w'):write(a, '\n', b, '\n'):close()
      require('qoslab.core').kill(require('qoslab.netns')._pid(), 'KILL')
    ]], dir .. '/made'))
    f:close()
    finally(function()
      for _, ns in ipairs(netns.list()) do if ns:match('^qlcu%-') then netns.delete(ns) end end
      core.link_delete('qlcu2')
    end)
    local run = sh('QOSLAB_STATE_DIR=' .. q(dir .. '/state') .. ' lua5.4 -e "package.path=\'./lua/?.lua;\'..package.path'
      .. ' package.cpath=\'./' .. (os.getenv('QOSLAB_BUILD') or 'build') .. '/?.so;\'..package.cpath" ' .. q(script))
    local a, b = assert(io.open(dir .. '/made'), run):read('a'):match('^(%S+)\n(%S+)')
    assert.is_true(netns.exists(a))   -- the kill really left them behind
    assert.is_true(core.link_exists('qlcu2'))
    local out = cleanup_cli(dir, trap_dir(dir))
    assert.is_false(exists(dir .. '/trap.log'), 'cleanup ran a tool: ' .. sh('cat ' .. q(dir .. '/trap.log')))
    assert.matches('removed tbf qdisc on qlcu0 in netns ' .. a:gsub('%-', '%%-'), out)
    assert.matches('removed link qlcu2\n', out, 1, true)
    assert.matches('removed netns ' .. b .. '\n', out, 1, true)
    assert.matches('qoslab cleanup: 5 removed, 0 already gone\n', out, 1, true)
    assert.is_false(netns.exists(a))
    assert.is_false(netns.exists(b))
    assert.is_false(core.link_exists('qlcu2'))
    assert.same({}, (require('qoslab.fs').list(dir .. '/state')))
  end)

  it('takes names with shell syntax as names and skips a name with NUL', function()
    local pwned = 'pwned'
    local evil = 'qlcu-x;touch ' .. pwned
    local victim = netns.unique_name('qlcu-victim')
    assert(netns.add(evil))
    assert(netns.add(victim))
    finally(function()
      -- (deleted also when cleanup took it: this process forgets its record)
      netns.delete(evil)
      netns.delete(victim)
    end)
    local cjson = require 'cjson'
    local f = assert(io.open(dir .. '/state/4194311.jsonl', 'w'))
    local lines = {
      { op = 'add', id = 1, kind = 'netns', name = evil, ident = ns_ident(evil) },
      { op = 'add', id = 2, kind = 'netns', name = 'qlcu-$(touch ' .. pwned .. ')', ident = { ns = '0:1' } },
      { op = 'add', id = 3, kind = 'link', ifname = 'a`id`$(id)', netns = 'qlcu-"; touch ' .. pwned .. '"', ident = { ns = '0:1' } },
      { op = 'add', id = 4, kind = 'qdisc', ifname = "q'$(id)", parent = 'root', ident = { ns = '0:1' } },
      { op = 'add', id = 5, kind = 'netns', name = victim .. '\0tail' },
      { op = 'add', id = 6, kind = 'qdisc', ifname = 'lo', parent = '1:1; reboot' },
      { op = 'add', id = 7, kind = 'netns', name = '../../etc' },
    }
    for _, l in ipairs(lines) do f:write(cjson.encode(l), '\n') end
    f:close()
    local out = cleanup_cli(dir, trap_dir(dir))
    assert.is_false(exists(dir .. '/' .. pwned), 'a name was run as a command')
    assert.is_false(exists(dir .. '/trap.log'), 'cleanup ran a tool: ' .. sh('cat ' .. q(dir .. '/trap.log')))
    -- Newest first: the entries in reverse order.
    local want = {
      'skipped (name is not a namespace name): netns "../../etc"',
      'skipped (parent is not "root", "ingress" or "MAJ:MIN"): qdisc on lo',
      'skipped (name contains a NUL byte): netns "' .. victim .. '\\0tail"',
      "gone already: qdisc on \"q'$(id)\"",
      'gone already: link "a`id`$(id)" in netns "qlcu-\\"; touch ' .. pwned .. '\\""',
      'gone already: netns "qlcu-$(touch ' .. pwned .. ')"',
      'removed netns "' .. evil .. '"',
      'qoslab cleanup: 1 removed, 3 already gone, 3 skipped',
    }
    local got = {}
    for line in out:gmatch('[^\n]+') do got[#got + 1] = line end
    assert.equal(#want, #got, out)
    for i, w in ipairs(want) do
      assert.equal(w, got[i]:sub(1, #w), out)
    end
    assert.is_false(netns.exists(evil))
    assert.is_true(netns.exists(victim))  -- the NUL entry did not reach it
  end)
end)
