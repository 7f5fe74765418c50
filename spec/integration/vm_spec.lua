-- qoslab.vm on the host: the netem probe tells the truth, bad input raises,
-- and (where a guest can run) commands and scripts run in it with their exit
-- status, output, environment and results coming back. Each boot costs
-- 3-7 s, so the guest tests are few and each checks several things.
local vm = require 'qoslab.vm'

local function sh(cmd)
  local p = assert(io.popen(cmd .. ' 2>&1', 'r'))
  local out = p:read('a')
  local ok = p:close()
  return ok == true, out
end

local function pid()
  local f = assert(io.open('/proc/self/stat', 'r'))
  local s = f:read('l')
  f:close()
  return tonumber(s:match('^(%d+)'))
end

local function read(path)
  local f = io.open(path, 'r')
  if not f then return nil end
  local s = f:read('a')
  f:close()
  return s
end

local function mktemp_dir()
  local ok, out = sh('mktemp -d /tmp/qoslab-vmspec.XXXXXX')
  assert(ok, out)
  return (out:gsub('\n$', ''))
end

local function probes_left()
  local _, out = sh('ip netns list')
  return out:match('qoslab%-probe%-' .. pid() .. '%-%d+')
end

describe('qoslab.vm', function()
  describe('host_has_netem', function()
    it('agrees with trying netem in a scratch namespace, and leaves nothing', function()
      local ns = 'qoslab-vmspec-' .. pid()
      assert(sh('ip netns add ' .. ns))
      local direct
      finally(function() sh('ip netns del ' .. ns) end)
      direct = sh('ip netns exec ' .. ns .. ' tc qdisc add dev lo root netem')
      local got, why = vm.host_has_netem()
      assert.are.equal(direct, got)
      if not got then
        assert.is_truthy(why:find('netem on lo of a scratch namespace: ', 1, true), why)
      end
      -- cached: the same answer, and still no probe namespace around
      assert.are.equal(got, vm.host_has_netem())
      assert.is_nil(probes_left())
    end)
  end)

  describe('bad input', function()
    local function raises(fn, opts, pattern)
      local ok, err = pcall(fn, opts)
      assert.is_false(ok, 'no error for ' .. pattern)
      assert.is_truthy(tostring(err):find(pattern, 1, true), tostring(err))
    end

    it('run names the field', function()
      raises(vm.run, nil, 'qoslab.vm.run: opts: expected a table, got nil')
      raises(vm.run, {}, 'qoslab.vm.run: opts.cmd: expected a non-empty string, got nil')
      raises(vm.run, { cmd = '' }, 'opts.cmd: expected a non-empty string, got string ""')
      raises(vm.run, { cmd = 3 }, 'opts.cmd: expected a non-empty string, got 3')
      raises(vm.run, { cmd = 'true', timeout = 5 }, 'opts.timeout: unknown key')
      raises(vm.run, { cmd = 'true', timeout_s = 0 }, 'opts.timeout_s: expected a finite number in [1, 604800], got 0')
      raises(vm.run, { cmd = 'true', timeout_s = 0 / 0 }, 'opts.timeout_s: expected a finite number')
      raises(vm.run, { cmd = 'true', timeout_s = '5' }, 'opts.timeout_s: expected a finite number')
      raises(vm.run, { cmd = 'true', rw_dir = 5 }, 'opts.rw_dir: expected a string, got 5')
      raises(vm.run, { cmd = 'true', rw_dir = '' }, 'opts.rw_dir: expected a non-empty string')
      raises(vm.run, { cmd = 'true', cwd = true }, 'opts.cwd: expected a string, got true')
      raises(vm.run, { cmd = 'true', env = 'A=1' }, 'opts.env: expected a table, got string')
      raises(vm.run, { cmd = 'true', env = { ['1A'] = 'x' } }, 'opts.env: expected keys that are variable names')
      raises(vm.run, { cmd = 'true', env = { 'x' } }, 'opts.env: expected keys that are variable names')
      raises(vm.run, { cmd = 'true', env = { A = {} } }, 'opts.env.A: expected a string or a number, got table')
    end)

    it('run_script names the field', function()
      raises(vm.run_script, {}, 'qoslab.vm.run_script: opts.script: expected a non-empty string, got nil')
      raises(vm.run_script, { script = 'p.lua', arg = {} }, 'opts.arg: unknown key')
      raises(vm.run_script, { script = 'p.lua', args = 'x' }, 'opts.args: expected a table, got string')
      raises(vm.run_script, { script = 'p.lua', args = { a = 1 } }, 'opts.args: expected a list')
      raises(vm.run_script, { script = 'p.lua', args = { true } }, 'opts.args[1]: expected a string or a number, got true')
      raises(vm.run_script, { script = 'p.lua', env = 7 }, 'opts.env: expected a table, got 7')
      raises(vm.run_script, { script = 'p.lua', timeout_s = -1 }, 'opts.timeout_s: expected a finite number')
    end)

    it('missing directories and scripts are failures of the world, not errors', function()
      local st, msg, code = vm.run { cmd = 'true', rw_dir = '/nonexistent/qoslab-' .. pid() }
      assert.is_nil(st)
      assert.are.equal('ENOENT', code)
      assert.is_truthy(msg:find('opts.rw_dir: no such directory', 1, true), msg)
      st, msg, code = vm.run { cmd = 'true', cwd = '/nonexistent/qoslab-' .. pid() }
      assert.is_nil(st)
      assert.are.equal('ENOENT', code)
      assert.is_truthy(msg:find('opts.cwd: no such directory', 1, true), msg)
      st, msg, code = vm.run_script { script = '/nonexistent/qoslab-' .. pid() .. '.lua' }
      assert.is_nil(st)
      assert.are.equal('ENOENT', code)
      assert.is_truthy(msg:find('opts.script: no such file', 1, true), msg)
    end)
  end)

  describe('in the guest', function()
    local ok, why, code = vm.available()

    it('available() answers true or nil, message, code', function()
      if ok then
        assert.is_true(ok)
      else
        assert.is_nil(ok)
        assert.is_string(why)
        assert.is_truthy(code:match('^E[A-Z]+$'), code)
      end
    end)

    local boot_it = ok and it or function(name) pending(name .. ' (no guest here: ' .. tostring(why) .. ')') end

    boot_it('returns the exit status and streams stdout/stderr separately', function()
      -- A child lua so that its stdout can be captured; stderr goes to a
      -- file; TMPDIR points the harness's run dir into our temp dir, which
      -- must hold nothing of it afterwards.
      local dir = mktemp_dir()
      finally(function() sh('rm -rf ' .. dir) end)
      local f = assert(io.open(dir .. '/child.lua', 'w'))
      f:write([[
package.path = './lua/?.lua;' .. package.path
package.cpath = './' .. (os.getenv('QOSLAB_BUILD') or 'build') .. '/?.so;' .. package.cpath
local st = require('qoslab.vm').run{cmd = 'echo out-line; echo err-line >&2; exit 3'}
print('status=' .. tostring(st))
]])
      f:close()
      local p = assert(io.popen('TMPDIR=' .. dir .. ' lua5.4 ' .. dir .. '/child.lua 2>' .. dir .. '/err', 'r'))
      local out = p:read('a')
      p:close()
      assert.are.equal('out-line\nstatus=3\n', out)
      assert.are.equal('err-line\n', read(dir .. '/err'))
      local _, left = sh('ls -A ' .. dir)
      assert.are.equal('child.lua\nerr\n', left)
    end)

    boot_it('passes env and cwd in, and a file written into rw_dir lands on the host', function()
      local dir = mktemp_dir()
      finally(function() sh('rm -rf ' .. dir) end)
      local st = vm.run {
        cmd = [[printf '%s|%s|%s|%s' "$FOO" "$N" "$(pwd)" "$QOSLAB_IN_VM" > "$OUT/f.txt" &&
                tc qdisc add dev lo root netem delay 1ms && echo netem-ok >> "$OUT/f.txt"]],
        env = { FOO = "a b'c $HOME", N = 42, OUT = dir }, cwd = '/usr', rw_dir = dir, timeout_s = 120,
      }
      assert.are.equal(0, st)
      assert.are.equal("a b'c $HOME|42|/usr|1netem-ok\n", read(dir .. '/f.txt'))
    end)

    boot_it('run_script runs bin/qoslab run FILE ARGS with its results in rw_dir', function()
      local dir = mktemp_dir()
      finally(function() sh('rm -rf ' .. dir) end)
      local f = assert(io.open(dir .. '/plan.lua', 'w'))
      f:write([[
local q = require 'qoslab'
local out, extra = ...
local ok = os.execute('tc qdisc add dev lo root netem delay 1ms')
local r = assert(io.open(out .. '/result.txt', 'w'))
r:write(q._VERSION, ' ', tostring(ok), ' ', extra, ' ', #arg, '\n')
r:close()
]])
      f:close()
      local st = vm.run_script { script = dir .. '/plan.lua', args = { dir, 'x y' }, rw_dir = dir, timeout_s = 120 }
      assert.are.equal(0, st)
      assert.are.equal(require('qoslab')._VERSION .. ' true x y 2\n', read(dir .. '/result.txt'))
    end)

    -- system(3) ignores SIGINT in its caller, so this once went unnoticed:
    -- the signal must reach the harness, the guest stop, and the exit be
    -- 130 with one line (no traceback).
    boot_it('qoslab run --guest: SIGINT to the qoslab process alone stops the guest, exit 130', function()
      local dir = mktemp_dir()
      finally(function() sh('rm -rf ' .. dir) end)
      local f = assert(io.open(dir .. '/slow.lua', 'w'))
      f:write([[
local w = assert(io.open(QOSLAB_RUN.out .. '/started', 'w')) w:write('x') w:close()
qoslab.timer.sleep(120)
local d = assert(io.open(QOSLAB_RUN.out .. '/finished', 'w')) d:write('x') d:close()
]])
      f:close()
      local out = dir .. '/o'
      assert(sh('mkdir ' .. out))
      -- TMPDIR: the harness's run dir goes into our dir; it is removed once
      -- the harness has stopped qemu.
      os.execute(string.format("sh -c 'TMPDIR=%s lua5.4 bin/qoslab run %s --guest --out %s >%s 2>&1 & echo $! >%s; wait $!; echo $? >%s' &",
        dir, dir .. '/slow.lua', out, dir .. '/log', dir .. '/pid', dir .. '/rc'))
      local t0 = os.time()
      while read(out .. '/started') ~= 'x' and os.time() - t0 < 120 do sh('sleep 0.2') end
      assert.are.equal('x', read(out .. '/started'), read(dir .. '/log'))
      local qpid = assert(tonumber(read(dir .. '/pid')))
      sh('kill -INT ' .. qpid)
      while not (read(dir .. '/rc') or ''):find('\n') and os.time() - t0 < 150 do sh('sleep 0.2') end
      local log = read(dir .. '/log') or ''
      assert.are.equal('130\n', read(dir .. '/rc'), log)
      assert.is_truthy(log:find('qoslab run: interrupted by SIGINT; the guest was stopped\n', 1, true), log)
      assert.is_truthy(log:find('qoslab run: results so far in ' .. out .. ' (continue with: qoslab run '
        .. dir .. '/slow.lua --resume --out ' .. out .. ')\n', 1, true), log)
      assert.is_nil(log:find('traceback', 1, true), log)
      assert.is_nil(read(out .. '/finished'))
      local _, left = sh('ls -A ' .. dir)
      assert.is_nil(left:find('qoslab-vm-run', 1, true), left)
      local _, q = sh("pgrep -f '[q]emu-system.*" .. dir .. "/qoslab-vm-run'")
      assert.are.equal('', q)
    end)

    boot_it('kills a guest that runs past timeout_s and returns 124', function()
      local t0 = os.time()
      local st = vm.run { cmd = 'sleep 600', timeout_s = 8 }
      assert.are.equal(124, st)
      assert.is_true(os.time() - t0 < 30)
    end)
  end)
end)
