-- bin/qoslab run / netem / demo / cleanup: flags, bad input, exit codes, and
-- SIGINT/SIGTERM in the middle of a sweep (teardown and __close run; 130/143).
-- The testbed, engine and netem are the fakes of spec/support/fake_testbed.lua
-- (loaded through LUA_INIT_5_4), so no root is needed; the real thing is in
-- spec/integration/plan_*_spec.lua.
local timer = require 'qoslab.timer'

local function tmpdir()
  local p = assert(io.popen('mktemp -d /tmp/qoslab-cli-spec.XXXXXX'))
  local d = p:read('l')
  p:close()
  return d
end

local function slurp(path)
  local f = io.open(path, 'rb')
  if not f then return nil end
  local s = f:read('a')
  f:close()
  return s
end

local function write(path, text)
  local f = assert(io.open(path, 'w'))
  f:write(text)
  f:close()
end

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local FAKE_INIT = "package.path = './spec/?.lua;' .. package.path; require('support.fake_testbed').install()"

-- Run bin/qoslab with args; returns exit status, stdout, stderr.
local function qoslab(dir, args, env)
  local cmd = string.format('%s bin/qoslab %s >%s 2>%s; echo $?', env or '', args,
    q(dir .. '/stdout'), q(dir .. '/stderr'))
  local p = assert(io.popen(cmd))
  local rc = tonumber(p:read('l'))
  p:close()
  return rc, slurp(dir .. '/stdout') or '', slurp(dir .. '/stderr') or ''
end

describe('qoslab CLI (plan commands)', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute('rm -rf ' .. q(dir)) end)

  describe('run', function()
    it('runs a plan with qoslab, QOSLAB_RUN and the script arguments', function()
      write(dir .. '/p.lua', [[
local s = qoslab.plan.sweep { name = 'p', params = { x = { 1, 2 } }, run = function(p) return p.x end }
print('args', ...)
print('run', QOSLAB_RUN.out, QOSLAB_RUN.resume, QOSLAB_RUN.quick, QOSLAB_RUN.where, #s.points)
]])
      local rc, out, err = qoslab(dir, 'run ' .. q(dir .. '/p.lua') .. ' --out ' .. q(dir .. '/o') .. ' --quick -- a b')
      assert.equal(0, rc, err)
      assert.matches('args\ta\tb\n', out, 1, true)
      assert.matches('run\t' .. dir .. '/o\tfalse\ttrue\thost\t2\n', out, 1, true)
      assert.matches('qoslab run: results in ' .. dir .. '/o', err, 1, true)
      assert.matches('[p 2/2] x=2: 2 bit/s', err, 1, true)
      local lines = 0
      for _ in io.lines(dir .. '/o/results.jsonl') do lines = lines + 1 end
      assert.equal(2, lines)
    end)

    it('--resume skips the points already recorded', function()
      write(dir .. '/p.lua', [[
qoslab.plan.sweep { name = 'r', params = { x = { 1, 2, 3 } }, run = function(p)
  local f = io.open(QOSLAB_RUN.out .. '/runs', 'a') f:write(p.x, '\n') f:close() return p.x end }
]])
      local out = q(dir .. '/o')
      assert.equal(0, (qoslab(dir, 'run ' .. q(dir .. '/p.lua') .. ' --out ' .. out)))
      assert.equal(0, (qoslab(dir, 'run ' .. q(dir .. '/p.lua') .. ' --out ' .. out .. ' --resume')))
      assert.equal('1\n2\n3\n', slurp(dir .. '/o/runs'))
    end)

    it('an unknown flag: usage, the flag named, exit 2', function()
      write(dir .. '/p.lua', 'return 0')
      local rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/p.lua') .. ' --bogus')
      assert.equal(2, rc)
      assert.matches("unknown option '--bogus'", err, 1, true)
      assert.matches('Usage:', err, 1, true)
    end)

    it('a missing or broken plan file: the reason, exit 2, nothing created', function()
      local rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/none.lua') .. ' --out ' .. q(dir .. '/o'))
      assert.equal(2, rc)
      assert.matches('cannot load ' .. dir .. '/none.lua', err, 1, true)
      write(dir .. '/bad.lua', 'x = = 1')
      rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/bad.lua') .. ' --out ' .. q(dir .. '/o'))
      assert.equal(2, rc)
      assert.matches("bad.lua:1: unexpected symbol near '='", err, 1, true)
      assert.is_nil(slurp(dir .. '/o/results.jsonl'))
    end)

    it('a plan that raises: its message and location, exit 1', function()
      write(dir .. '/raise.lua', [[
qoslab.plan.sweep { name = 'e', params = { x = { 1 } }, run = function() error('no route to host') end }
]])
      local rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/raise.lua') .. ' --out ' .. q(dir .. '/o'))
      assert.equal(1, rc)
      assert.matches('qoslab run: ' .. dir .. '/raise.lua: ' .. dir .. '/raise.lua:1: no route to host', err, 1, true)
    end)

    it('a directory, a non-result return, internal positions: one clear line, no traceback', function()
      local rc, _, err = qoslab(dir, 'run ' .. q(dir))
      assert.equal(2, rc)
      assert.equal('qoslab run: cannot load ' .. dir .. ': is a directory, not a file (EISDIR)\n', err)
      write(dir .. '/abc.lua', [[

qoslab.plan.sweep { name = 'a', params = { x = { 1 } }, run = function() return 'abc' end }
]])
      rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/abc.lua') .. ' --out ' .. q(dir .. '/o'))
      assert.equal(1, rc)
      assert.matches('qoslab run: ' .. dir .. '/abc.lua: ' .. dir .. '/abc.lua:2: qoslab.plan.sweep: x=1: '
        .. 'run returned string "abc"; expected a result table or a number\n', err, 1, true)
      assert.is_nil(err:find('stack traceback', 1, true), err)
      -- An error raised inside qoslab: the plan's line, not qoslab's.
      write(dir .. '/inner.lua', [[
local tb = qoslab.testbed { impair = { delay_ms = -5 } }
]])
      rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/inner.lua') .. ' --host --out ' .. q(dir .. '/o2'))
      assert.equal(1, rc)
      assert.matches(dir .. '/inner.lua:1: qoslab.testbed: opts.impair.delay_ms: expected', err, 1, true)
      assert.is_nil(err:find('lua/qoslab/', 1, true), err)
      assert.is_nil(err:find('stack traceback', 1, true), err)
      -- QOSLAB_DEBUG=1 shows the stack.
      rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/abc.lua') .. ' --out ' .. q(dir .. '/o'), 'QOSLAB_DEBUG=1')
      assert.equal(1, rc)
      assert.matches('stack traceback:', err, 1, true)
    end)

    -- A FIFO nobody writes blocked `qoslab run` in open(2) for ever, and
    -- /dev/zero was read until Lua gave up: the file type is now checked
    -- before opening, the size bounded, and each case is one line, exit 2.
    it('a FIFO, a device, a big, an unreadable or a missing file: one line with the code, exit 2, no hang',
      function()
        local fifo = dir .. '/fifo.lua'
        assert(os.execute('mkfifo ' .. q(fifo)))
        -- a sparse file: a 16 MiB string here would move malloc's mmap
        -- threshold for the rest of the run (and the RSS specs after it)
        assert(os.execute('truncate -s ' .. ((16 << 20) + 1) .. ' ' .. q(dir .. '/big.lua')))
        write(dir .. '/locked.lua', 'return 0')
        assert(os.execute('chmod 000 ' .. q(dir .. '/locked.lua') .. ' && chmod 755 ' .. q(dir)))
        local cases = {
          { fifo, 'is a FIFO, not a regular file (it could block or never end) (EFTYPE)' },
          { '/dev/zero', 'is a character device, not a regular file (it could block or never end) (EFTYPE)' },
          { dir .. '/big.lua', '16777217 bytes, more than the 16777216 read at most (EFBIG)' },
          { dir .. '/none.lua', 'cannot read it: No such file or directory (check the path) (ENOENT)' },
        }
        local t0 = os.time()
        for _, c in ipairs(cases) do
          local rc, _, err = qoslab(dir, 'run ' .. q(c[1]) .. ' --out ' .. q(dir .. '/o'), 'timeout 20')
          assert.equal(2, rc, c[1])
          assert.equal('qoslab run: cannot load ' .. c[1] .. ': ' .. c[2] .. '\n', err)
          assert.is_nil(slurp(dir .. '/o/results.jsonl'))
        end
        -- root reads any file: the permission case runs as nobody
        local rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/locked.lua') .. ' --out ' .. q(dir .. '/o2'),
          'setpriv --reuid=65534 --regid=65534 --clear-groups env')
        if rc ~= 127 and os.execute('test "$(id -u)" = 0') then
          assert.equal(2, rc)
          assert.equal('qoslab run: cannot load ' .. dir .. '/locked.lua: cannot open it: Permission denied '
            .. '(no permission to read it) (EACCES)\n', err)
        end
        assert(os.time() - t0 < 60, 'took ' .. (os.time() - t0) .. ' s')
      end)

    it('a "#" first line is skipped and line numbers stay those of the file', function()
      write(dir .. '/sh.lua', '#!/usr/bin/env qoslab\nprint("ran", ...)\nerror("boom")\n')
      local rc, out, err = qoslab(dir, 'run ' .. q(dir .. '/sh.lua') .. ' --out ' .. q(dir .. '/o') .. ' -- x')
      assert.equal(1, rc)
      assert.equal('ran\tx\n', out)
      assert.matches(dir .. '/sh.lua:3: boom', err, 1, true)
    end)

    it('--resume without --out is refused; a failed run leaves no empty folder', function()
      write(dir .. '/p.lua', 'return 0')
      local rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/p.lua') .. ' --resume')
      assert.equal(2, rc)
      assert.equal('qoslab run: --resume needs --out DIR: the results folder to continue\n', err)
      write(dir .. '/fail.lua', 'error("boom")')
      rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/fail.lua') .. ' --out ' .. q(dir .. '/new/o'))
      assert.equal(1, rc)
      assert.matches('removed the empty ' .. dir .. '/new/o', err, 1, true)
      assert.is_nil(io.open(dir .. '/new/o', 'r'))
      -- A folder that existed before is left alone.
      os.execute('mkdir ' .. q(dir .. '/old'))
      rc = qoslab(dir, 'run ' .. q(dir .. '/fail.lua') .. ' --out ' .. q(dir .. '/old'))
      assert.equal(1, rc)
      assert.is_truthy(io.open(dir .. '/old', 'r'))
    end)

    -- A plan that only prints (the README's tput.lua) ended well and left a
    -- folder holding {"plan": "tput"}: no exit_status, no page, though the
    -- run had said "results in" it. A folder made for a run that got
    -- nothing now goes whatever the end; one that stays records the end.
    it('a successful run that writes nothing removes its folder; a kept folder records the end', function()
      write(dir .. '/tput.lua', 'print("result: 42")')
      local rc, out, err = qoslab(dir, 'run ' .. q(dir .. '/tput.lua') .. ' --out ' .. q(dir .. '/new/o'))
      assert.equal(0, rc, err)
      assert.equal('result: 42\n', out)
      local last = 'qoslab run: nothing was written; removed the empty ' .. dir .. '/new/o\n'
      assert.equal(last, err:sub(-#last))
      assert.is_nil(io.open(dir .. '/new/o', 'r'))
      os.execute('mkdir ' .. q(dir .. '/old'))
      rc = qoslab(dir, 'run ' .. q(dir .. '/tput.lua') .. ' --out ' .. q(dir .. '/old'))
      assert.equal(0, rc)
      local mark = assert(slurp(dir .. '/old/qoslab-run.json'))
      assert.same({ plan = 'tput', exit_status = 0 }, require('cjson').decode(mark))
      assert.is_nil(slurp(dir .. '/old/index.html'))
    end)

    it('inside the guest progress goes to stdout, in order with what the plan prints', function()
      write(dir .. '/p.lua', [[
qoslab.plan.sweep { name = 'g', params = { x = { 1, 2 } }, run = function(p) return p.x end }
print('TABLE')
]])
      local rc, out, err = qoslab(dir, 'run ' .. q(dir .. '/p.lua') .. ' --in-guest --out ' .. q(dir .. '/o'))
      assert.equal(0, rc, err)
      assert.matches('^%[g 1/2%] x=1: 1 bit/s[^\n]*\n%[g 2/2%] x=2: 2 bit/s[^\n]*\nTABLE\n$', out)
      assert.is_nil(err:find('[g ', 1, true), err)
    end)

    -- `--timeout -5` was taken (tonumber) and the plan ran: a bad one is now
    -- refused with the range qoslab.vm takes, before anything runs.
    it('--timeout out of [1, 604800], NaN, inf or no number: exit 2 naming it, nothing run', function()
      write(dir .. '/p.lua', 'print("RAN")')
      for _, t in ipairs { '-5', '0', 'nan', 'inf', '1e9', 'x' } do
        local rc, out, err = qoslab(dir, 'run ' .. q(dir .. '/p.lua') .. ' --out ' .. q(dir .. '/o')
          .. ' --timeout ' .. t)
        assert.equal(2, rc, t)
        assert.matches("qoslab run: error: --timeout: expected a number of seconds in [1, 604800], got '"
          .. t .. "'", err, 1, true)
        assert.equal('', out)
        assert.is_nil(io.open(dir .. '/o', 'r'))
      end
      local rc, _, err = qoslab(dir, 'demo --timeout -1')
      assert.equal(2, rc)
      assert.matches("qoslab demo: error: --timeout: expected a number of seconds in [1, 604800], got '-1'",
        err, 1, true)
      rc = qoslab(dir, 'run ' .. q(dir .. '/p.lua') .. ' --out ' .. q(dir .. '/o') .. ' --timeout 10')
      assert.equal(0, rc)
    end)

    it('--guest and --host together are refused', function()
      write(dir .. '/p.lua', 'return 0')
      local rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/p.lua') .. ' --guest --host')
      assert.equal(2, rc)
      assert.matches('--guest and --host exclude each other', err, 1, true)
    end)

    -- SIGHUP (a closed terminal or SSH session) exited 129 with no message and
    -- no teardown: it is handled as SIGTERM is.
    for _, sig in ipairs { { 'INT', 130 }, { 'TERM', 143 }, { 'HUP', 129 } } do
      it('SIG' .. sig[1] .. ' mid-sweep: teardown and __close run, exit ' .. sig[2], function()
        write(dir .. '/slow.lua', [[
local out = QOSLAB_RUN.out
local function mark(name) local f = io.open(out .. '/' .. name, 'w') f:write('x') f:close() end
local guard <close> = setmetatable({}, { __close = function() mark('closed') end })
qoslab.plan.sweep { name = 'slow', params = { x = { 1, 2, 3, 4, 5, 6, 7, 8 } },
  run = function(p)
    if p.x == 2 then mark('running2') end
    qoslab.timer.sleep(1)
    return p.x
  end,
  teardown_point = function(p, _, err) if err then mark('teardown_point_err') end end,
  teardown = function(_, err) if err then mark('teardown_err') end end }
mark('finished')
]])
        local o = dir .. '/o'
        os.execute(string.format('sh -c %s &', q(string.format(
          'bin/qoslab run %s --out %s >%s 2>&1 & echo $! >%s; wait $!; echo $? >%s',
          q(dir .. '/slow.lua'), q(o), q(dir .. '/log'), q(dir .. '/pid'), q(dir .. '/rc')))))
        local t0 = timer.now()
        -- Land inside the second point's 1 s run.
        while not slurp(o .. '/running2') and timer.now() - t0 < 15 do timer.sleep(0.02) end
        local pid = assert(tonumber(slurp(dir .. '/pid')))
        os.execute('kill -' .. sig[1] .. ' ' .. pid)
        while not (slurp(dir .. '/rc') or ''):find('\n') and timer.now() - t0 < 20 do timer.sleep(0.02) end
        assert.equal(tostring(sig[2]) .. '\n', slurp(dir .. '/rc'), slurp(dir .. '/log'))
        assert.equal('x', slurp(o .. '/closed'), slurp(dir .. '/log'))
        assert.equal('x', slurp(o .. '/teardown_err'))
        assert.equal('x', slurp(o .. '/teardown_point_err'), slurp(dir .. '/log'))
        assert.is_nil(slurp(o .. '/finished'))
        assert.matches('qoslab run: interrupted by SIG' .. sig[1] .. '\n', slurp(dir .. '/log'), 1, true)
        local _, said = slurp(dir .. '/log'):gsub('interrupted by SIG', '')
        assert.equal(1, said, slurp(dir .. '/log'))
        assert.is_nil(slurp(dir .. '/log'):find('stack traceback', 1, true), slurp(dir .. '/log'))
        assert.matches('qoslab run: results so far in ' .. o .. ' (continue with: qoslab run '
          .. dir .. '/slow.lua --resume --out ' .. o .. ')\n', slurp(dir .. '/log'), 1, true)
        assert.is_nil(slurp(dir .. '/log'):find('nothing was written', 1, true))
      end)
    end
  end)

  describe('results folders', function()
    local function run_bg(args)
      os.execute(string.format('sh -c %s &', q(string.format(
        'bin/qoslab run %s >%s 2>&1 & echo $! >%s; wait $!; echo $? >%s',
        args, q(dir .. '/log'), q(dir .. '/pid'), q(dir .. '/rc')))))
    end

    it('interrupted before anything was written: one message, the folder removed', function()
      write(dir .. '/wait.lua', "io.open(QOSLAB_RUN.out .. '/../started', 'w'):close() qoslab.timer.sleep(10)")
      local o = dir .. "/it's"
      run_bg(q(dir .. '/wait.lua') .. ' --out ' .. q(o))
      local t0 = timer.now()
      while not slurp(dir .. '/started') and timer.now() - t0 < 15 do timer.sleep(0.02) end
      os.execute('kill -INT ' .. assert(tonumber(slurp(dir .. '/pid'))))
      while not (slurp(dir .. '/rc') or ''):find('\n') and timer.now() - t0 < 20 do timer.sleep(0.02) end
      local log = slurp(dir .. '/log')
      assert.equal('130\n', slurp(dir .. '/rc'), log)
      assert.matches("nothing was written; removed the empty '" .. dir .. "/it'\\''s'\n", log, 1, true)
      assert.is_nil(log:find('results so far', 1, true), log)
      assert.is_nil(require('qoslab.fs').kind(o))
    end)

    -- A plan that caught the interruption with pcall and then ended normally
    -- exited 0 after SIGTERM: a signal received during the run is its status.
    it('SIGTERM caught by a pcall in the plan still exits 143', function()
      write(dir .. '/catch.lua', "io.open(QOSLAB_RUN.out .. '/../started', 'w'):close() "
        .. "local ok = pcall(qoslab.timer.sleep, 10) "
        .. "io.open(QOSLAB_RUN.out .. '/caught', 'w'):write(tostring(ok)):close()")
      local o = dir .. '/c'
      run_bg(q(dir .. '/catch.lua') .. ' --out ' .. q(o))
      local t0 = timer.now()
      while not slurp(dir .. '/started') and timer.now() - t0 < 15 do timer.sleep(0.02) end
      os.execute('kill -TERM ' .. assert(tonumber(slurp(dir .. '/pid'))))
      while not (slurp(dir .. '/rc') or ''):find('\n') and timer.now() - t0 < 20 do timer.sleep(0.02) end
      local log = slurp(dir .. '/log')
      assert.equal('143\n', slurp(dir .. '/rc'), log)
      assert.equal('false', slurp(o .. '/caught'), log)
      assert.matches('qoslab run: interrupted by SIGTERM\n', log, 1, true)
    end)

    it('two runs in the same second get two folders; a non-empty --out needs --resume', function()
      write(dir .. '/p.lua', "io.open(QOSLAB_RUN.out .. '/x', 'w'):close() print(QOSLAB_RUN.out)")
      local bin = q(require('qoslab.fs').cwd() .. '/bin/qoslab')
      local cmd = 'cd ' .. q(dir) .. ' && for i in 1 2 3; do ' .. bin .. ' run p.lua & done; wait'
      local p = assert(io.popen('(' .. cmd .. ') 2>/dev/null')); local out = p:read('a'); p:close()
      local seen, n = {}, 0
      for d in out:gmatch('[^\n]+') do
        assert.matches('^results/p%-%d+%-%d+', d)
        assert.is_nil(seen[d], out); seen[d] = true; n = n + 1
      end
      assert.equal(3, n, out)
      local one = next(seen)
      local rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/p.lua') .. ' --out ' .. q(dir .. '/' .. one))
      assert.equal(2, rc)
      assert.matches('exists and is not empty: pass --resume to continue the run in it, or another --out', err, 1, true)
      rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/p.lua') .. " --out ''")
      assert.equal(2, rc)
      assert.matches('--out: expected a folder path, got an empty string', err, 1, true)
      -- --resume with another plan's folder is refused.
      write(dir .. '/other.lua', 'print(1)')
      rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/other.lua') .. ' --resume --out ' .. q(dir .. '/' .. one))
      assert.equal(2, rc)
      assert.matches('holds a run of plan "p", not "other"', err, 1, true)
      rc = qoslab(dir, 'run ' .. q(dir .. '/p.lua') .. ' --resume --out ' .. q(dir .. '/' .. one))
      assert.equal(0, rc)
    end)

    it('says why a folder cannot be made, with exit 1', function()
      write(dir .. '/p.lua', 'print(1)')
      write(dir .. '/afile', '')
      local rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/p.lua') .. ' --out ' .. q(dir .. '/afile/sub'))
      assert.equal(1, rc)
      assert.matches('afile is a file (ENOTDIR)', err, 1, true)
      rc, _, err = qoslab(dir, 'run ' .. q(dir .. '/p.lua') .. ' --out ' .. q(dir .. '/' .. ('n'):rep(300)))
      assert.equal(1, rc)
      assert.matches('File name too long (ENAMETOOLONG)', err, 1, true)
    end)
  end)

  describe('demo and examples (fake testbed and engine)', function()
    it('demo on the link backend names the drop column and its footnote after the link', function()
      local o = dir .. '/demo-link'
      local rc, out, err = qoslab(dir, 'demo --host --quick --out ' .. q(o),
        'QOSLAB_FAKE_BACKEND=link LUA_INIT_5_4=' .. q(FAKE_INIT))
      assert.equal(0, rc, err)
      assert.matches('| retransmits | link drops | backlog drops |', out, 1, true)
      assert.matches("link drops: qoslab's impairment link's own counter during the run", out, 1, true)
      assert.is_nil(out:find('netem drops', 1, true))
      assert.is_nil(out:find("netem's own counter", 1, true))
    end)

    it('demo --host --quick prints the tables and writes CSV, JSON and PNG', function()
      local o = dir .. '/demo'
      local rc, out, err = qoslab(dir, 'demo --host --quick --out ' .. q(o),
        'LUA_INIT_5_4=' .. q(FAKE_INIT))
      assert.equal(0, rc, err)
      assert.matches('qoslab demo: results folder ' .. o, out, 1, true)
      assert.matches('qoslab demo: on this host, backend ', out, 1, true)
      assert.matches('loss % \\ delay ms', out, 1, true)
      assert.matches('TCP throughput vs one-way delay', out, 1, true)
      -- What explains each delay point: the cwnd bound (not a configured
      -- window), retransmits, netem's drops during the run (the fake's counter
      -- goes up by one per read, so 1), and the CPU flag.
      assert.matches('delay ms | Mbit/s (± 95 % CI) | max cwnd/RTT Mbit/s | retransmits | netem drops | '
        .. 'backlog drops | CPU-limited | reference Mbit/s\n', out, 1, true)
      assert.matches('\n%s+1 |%s+%d+ |%s+[%d.]+ |%s+0 |%s+1 |%s+%d+ |%s+no |%s+854\n', out)
      assert.is_nil(out:find('| window/RTT Mbit/s | reference', 1, true))
      assert.is_nil(out:find('measured inside the qemu guest', 1, true))
      assert.matches("title 'max cwnd / RTT (sender TCP_INFO)'", slurp(o .. '/delay.gp'), 1, true)
      for _, f in ipairs { 'results.jsonl', 'delay.csv', 'delay.json', 'delay.png', 'delay.svg',
                           'matrix.csv', 'matrix-heatmap.png',
                           'window.csv', 'window.png' } do
        assert.is_string(slurp(o .. '/' .. f), 'missing ' .. f)
      end
      -- the quick matrix is 2 x 2: too small a grid for a readable surface,
      -- the heat map alone shows it
      assert.is_nil(slurp(o .. '/matrix-surface.png'))
      -- the window plot has its window / RTT ceiling
      assert.matches("title 'ceiling: x / RTT (300 ms)'", slurp(o .. '/window.gp'), 1, true)
      assert.equal('\137PNG', slurp(o .. '/delay.png'):sub(1, 4))
    end)

    it('the demo measured in the guest says why its points spread', function()
      local o = dir .. '/demo'
      local rc, out, err = qoslab(dir, 'run lua/qoslab/demo.lua --in-guest --quick --out ' .. q(o),
        'LUA_INIT_5_4=' .. q(FAKE_INIT))
      assert.equal(0, rc, err)
      assert.matches('note: measured inside the qemu guest, whose CPU is emulated (TCG)', out, 1, true)
    end)

    for _, ex in ipairs { 'delay_sweep', 'loss_delay_matrix', 'window_sweep', 'parallel_clients', 'udp_bitrate' } do
      it('examples/' .. ex .. '.lua runs in its quick form', function()
        local o = dir .. '/' .. ex
        local rc, out, err = qoslab(dir, 'run examples/' .. ex .. '.lua --host --quick --out ' .. q(o),
          'LUA_INIT_5_4=' .. q(FAKE_INIT))
        assert.equal(0, rc, err)
        assert.matches('plot', out, 1, true)
        assert.is_string(slurp(o .. '/results.jsonl'))
        local p = io.popen('ls ' .. q(o) .. ' | grep -c "\\.csv$"')
        local csv = tonumber(p:read('l'))
        p:close()
        assert.equal(1, csv)
      end)
    end
  end)

  describe('cleanup', function()
    it('says when nothing is left behind', function()
      local rc, out = qoslab(dir, 'cleanup', 'QOSLAB_STATE_DIR=' .. q(dir .. '/state'))
      assert.equal(0, rc)
      assert.equal('qoslab cleanup: nothing left behind\n', out)
    end)

    it('replays a dead process\'s state file and prints each entry', function()
      os.execute('mkdir -p ' .. q(dir .. '/state'))
      -- pid 2^22 + 1 is above pid_max's default, so no live process has it.
      write(dir .. '/state/4194305.jsonl',
        '{"op":"add","id":1,"kind":"netns","name":"qoslab-spec-gone-' .. os.time() .. '","ident":{"ns":"0:1"}}\n')
      local rc, out = qoslab(dir, 'cleanup', 'QOSLAB_STATE_DIR=' .. q(dir .. '/state'))
      assert.equal(0, rc)
      assert.matches('gone already: netns qoslab-spec-gone-', out, 1, true)
      assert.matches('qoslab cleanup: 0 removed, 1 already gone\n', out, 1, true)
      assert.is_nil(slurp(dir .. '/state/4194305.jsonl'))
    end)

    it('names a qdisc by the device it was on, not as the device', function()
      os.execute('mkdir -p ' .. q(dir .. '/state'))
      local ns = 'qoslab-spec-gone-' .. os.time() .. '-s'
      write(dir .. '/state/4194307.jsonl',
        '{"op":"add","id":1,"kind":"qdisc","ifname":"qltun-s","netns":"' .. ns .. '","parent":"root",'
        .. '"ident":{"ns":"0:1","ifindex":2,"qdisc_kind":"tbf","handle":"1:"}}\n')
      local rc, out = qoslab(dir, 'cleanup', 'QOSLAB_STATE_DIR=' .. q(dir .. '/state'))
      assert.equal(0, rc, out)
      assert.matches('gone already: tbf qdisc on qltun-s in netns ' .. ns .. '\n', out, 1, true)
    end)
  end)
end)
