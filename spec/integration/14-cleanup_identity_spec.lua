-- `qoslab cleanup` removed whatever a state file named, made by qoslab or
-- not: a dead-pid file naming a host veth, an `ip netns add` namespace, a
-- user's root tbf or plain ingress qdisc had them all deleted. Now an entry
-- carries what identified the object when qoslab made it (nsfs inode,
-- ifindex, qdisc kind and handle) and only a still-matching object is
-- removed; the rest is "skipped (not the one qoslab made: ...)". Also: state
-- files were named by pid alone, so a reused pid hid or took over a killed
-- run's file; a directory or FIFO in the state dir aborted or hung cleanup;
-- bad lines were dropped unsaid; a failed removal deleted the state file.
local core = require 'qoslab.core'
local netns = require 'qoslab.netns'
local lfs = require 'lfs'
local cjson = require 'cjson'

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
local function sh(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1'))
  local out = p:read('a')
  p:close()
  return out
end
local checkout = assert(require('qoslab.fs').cwd())
local build = os.getenv('QOSLAB_BUILD') or 'build'

local function cleanup_cli(dir, extra)
  return sh('timeout 20 env QOSLAB_STATE_DIR=' .. q(dir .. '/state') .. ' QOSLAB_BUILD=' .. q(build)
    .. ' lua5.4 ' .. q(checkout .. '/bin/qoslab') .. ' cleanup' .. (extra or ''))
end

local function write_state(path, lines)
  local f = assert(io.open(path, 'w'))
  for _, l in ipairs(lines) do f:write(type(l) == 'string' and l or cjson.encode(l), '\n') end
  f:close()
end

-- Run a Lua chunk in a child that kills itself with SIGKILL at the end.
local function killed_run(dir, body)
  local script = dir .. '/killed.lua'
  local f = assert(io.open(script, 'w'))
  f:write(body, "\nrequire('qoslab.core').kill(require('qoslab.netns')._pid(), 'KILL')\n")
  f:close()
  return sh('cd ' .. q(checkout) .. ' && QOSLAB_STATE_DIR=' .. q(dir .. '/state')
    .. ' lua5.4 -e "package.path=\'./lua/?.lua;\'..package.path package.cpath=\'./' .. build
    .. '/?.so;\'..package.cpath" ' .. q(script))
end

local function has_qdisc(ifname, kind, ns)
  for _, st in ipairs(assert(core.qdisc_stats(ifname, ns and { netns = ns } or nil))) do
    if st.kind == kind then return true end
  end
  return false
end

describe('qoslab cleanup and identity', function()
  local dir
  before_each(function()
    dir = os.tmpname(); os.remove(dir)
    assert(os.execute('mkdir -p ' .. q(dir .. '/state')))
  end)
  after_each(function() os.execute('rm -rf ' .. q(dir)) end)

  it('leaves a user\'s veth, namespace, root tbf and ingress named by a dead pid\'s file', function()
    finally(function()
      os.execute('ip link del qlid4 2>/dev/null; ip netns del qlid-victim 2>/dev/null')
    end)
    assert(os.execute('ip link add qlid4 type veth peer name qlid5'))
    assert(os.execute('ip netns add qlid-victim'))
    assert(os.execute('tc qdisc add dev qlid4 root tbf rate 10mbit burst 32k latency 50ms'))
    assert(os.execute('tc qdisc add dev qlid5 ingress'))
    write_state(dir .. '/state/999990.jsonl', {
      { op = 'add', id = 1, kind = 'netns', name = 'qlid-victim' },
      { op = 'add', id = 2, kind = 'link', ifname = 'qlid4' },
      { op = 'add', id = 3, kind = 'qdisc', ifname = 'qlid4', parent = 'root' },
      { op = 'add', id = 4, kind = 'qdisc', ifname = 'qlid5', parent = 'ingress' },
    })
    local out = cleanup_cli(dir)
    assert.matches('skipped (not the one qoslab made: no identity recorded): qdisc on qlid5\n', out, 1, true)
    assert.matches('skipped (not the one qoslab made: no identity recorded): netns qlid-victim\n', out, 1, true)
    assert.matches('qoslab cleanup: 0 removed, 0 already gone, 4 skipped\n', out, 1, true)
    assert.is_true(netns.exists('qlid-victim'))
    assert.is_true(core.link_exists('qlid4'))
    assert.is_true(has_qdisc('qlid4', 'tbf'))
    assert.is_true(has_qdisc('qlid5', 'ingress'))
  end)

  it('removes a killed run\'s objects but not same-named ones made after it', function()
    local made = dir .. '/made'
    finally(function()
      for _, ns in ipairs(netns.list()) do if ns:match('^qlid%-') then netns.delete(ns) end end
      os.execute('ip link del qlid6 2>/dev/null; ip link del qlid8 2>/dev/null')
    end)
    local run = killed_run(dir, string.format([[
      local netns, link, shape = require 'qoslab.netns', require 'qoslab.link', require 'qoslab.shape'
      local a, b = netns.unique_name('qlid'), netns.unique_name('qlid')
      assert(netns.add(a)); assert(netns.add(b))
      assert(link.add_veth{name = 'qlid6', peer = 'qlid7'})
      assert(link.add_veth{name = 'qlid8', peer = 'qlid9'})
      assert(shape.apply('qlid8', {kind = 'tbf', rate_bps = 10000000}))
      io.open(%q, 'w'):write(a, '\n', b, '\n', require('qoslab.state')._file(), '\n'):close()
    ]], made))
    local a, b, file = assert(io.open(made), run):read('a'):match('^(%S+)\n(%S+)\n(%S+)')
    -- The file names the process by pid, start time and boot.
    assert.matches('/%d+%-%d+%-%x+%.jsonl$', file)
    -- After the kill, the user replaces b, qlid6 and qlid8's shaper with their own.
    assert(netns.delete(b)); assert(os.execute('ip netns add ' .. b))
    assert(core.link_delete('qlid6'))
    assert(os.execute('ip link add qlid6 type veth peer name qlid7'))
    assert(os.execute('tc qdisc del dev qlid8 root && '
      .. 'tc qdisc add dev qlid8 root tbf rate 20mbit burst 32k latency 50ms'))
    local out = cleanup_cli(dir)
    assert.matches('skipped (not the one qoslab made: handle is ', out, 1, true)
    assert.matches('skipped (not the one qoslab made: ifindex is ', out, 1, true)
    assert.matches('skipped (not the one qoslab made: namespace inode is ', out, 1, true)
    assert.matches('removed link qlid8\n', out, 1, true)  -- the veth is the one it made
    assert.matches('removed netns ' .. a .. '\n', out, 1, true)
    assert.matches('qoslab cleanup: 2 removed, 0 already gone, 3 skipped\n', out, 1, true)
    assert.is_false(netns.exists(a))
    assert.is_true(netns.exists(b))
    assert.is_true(core.link_exists('qlid6'))
    assert.is_false(core.link_exists('qlid8'))
    assert.same({}, (require('qoslab.fs').list(dir .. '/state')))
  end)

  it('takes a file whose pid lives on in another process, and reports an old-style live one', function()
    local name = netns.unique_name('qlid')
    assert(netns.add(name))
    finally(function() netns.delete(name) end)  -- (also forgets its record when gone)
    local a = assert(lfs.attributes('/run/netns/' .. name))
    local boot = assert(io.open('/proc/sys/kernel/random/boot_id')):read('l'):gsub('%-', ''):sub(1, 8)
    -- pid 1 runs, but did not start at tick 1.
    write_state(dir .. '/state/1-1-' .. boot .. '.jsonl', {
      { op = 'add', id = 1, kind = 'netns', name = name,
        ident = { ns = string.format('%d:%d', a.dev, a.ino) } } })
    write_state(dir .. '/state/1.jsonl', { { op = 'add', id = 1, kind = 'netns', name = name } })
    local out = cleanup_cli(dir)
    assert.matches('removed netns ' .. name .. '\n', out, 1, true)
    assert.matches('1.jsonl: skipped (pid 1 runs; ', out, 1, true)
    assert.is_false(netns.exists(name))
  end)

  it('survives a directory and a FIFO, counts bad lines, keeps what it could not remove', function()
    assert(lfs.mkdir(dir .. '/state/999992.jsonl'))
    assert(os.execute('mkfifo ' .. q(dir .. '/state/999993.jsonl')))
    local lo_ns = assert(lfs.attributes('/proc/self/ns/net'))
    local lo = { op = 'add', id = 2, kind = 'link', ifname = 'lo',
                 ident = { ns = string.format('%d:%d', lo_ns.dev, lo_ns.ino), ifindex = 1 } }
    write_state(dir .. '/state/999994.jsonl', {
      '{"op":"add","id":1,"kind":"netns","na', 'garbage', lo })
    local out = cleanup_cli(dir)
    assert.matches('999992.jsonl: cannot read: ', out, 1, true)
    assert.matches('999993.jsonl: cannot read: ', out, 1, true)
    assert.matches('999994.jsonl: 2 lines did not parse', out, 1, true)
    assert.matches('not removed: link lo: ', out, 1, true)
    assert.matches(', 1 not removed\n', out, 1, true)
    -- Kept, with only what remains, for another try.
    local kept = assert(io.open(dir .. '/state/999994.jsonl')):read('a')
    assert.equal(1, select(2, kept:gsub('\n', '')))
    assert.same(lo, cjson.decode(kept))
  end)

  it('warns once when the state dir cannot be written', function()
    local out = sh('cd ' .. q(checkout) .. ' && QOSLAB_STATE_DIR=/proc/qoslab-no lua5.4'
      .. ' -e "package.path=\'./lua/?.lua;\'..package.path package.cpath=\'./' .. build .. '/?.so;\'..package.cpath"'
      .. ' -e "local n = require \'qoslab.netns\' local a, b = n.unique_name(\'qlid\'), n.unique_name(\'qlid\')'
      .. ' assert(n.add(a)) assert(n.add(b)) n.delete(a) n.delete(b)"')
    local _, count = out:gsub('cannot record what this run creates in /proc/qoslab%-no', '')
    assert.equal(1, count, out)
  end)
end)
