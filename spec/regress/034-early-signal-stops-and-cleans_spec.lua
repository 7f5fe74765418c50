-- 034: a SIGINT or SIGTERM in the first tens of milliseconds of
-- `qoslab run PLAN` was lost or left namespaces behind. qoslab installed its
-- handler only just before the plan ran; before that the lua5.4
-- interpreter's own SIGINT handler raised "interrupted!", which either
-- ended the command with status 1 and a traceback (in argparse, in
-- cli.main_status) or was swallowed by one of the pcall(require, ...) on the
-- way, so the run went on to the end and exited 0. A signal that came
-- between creating a namespace and recording it (qoslab.state) left a
-- testbed's qoslab-PID-N-c/-s/-r or vm.host_has_netem's
-- qoslab-probe-PID-N namespace that neither the run nor `qoslab cleanup`
-- knew of. Now bin/qoslab holds the signals first thing, the command arms
-- them, creation and record are one step for an interruption, a command
-- ended by a signal removes what it recorded, and `qoslab cleanup` also
-- takes namespaces named as qoslab names them whose process is gone (a
-- SIGKILL between creating and recording).
local H = require 'integration.traffic_helper'
local fs = require 'qoslab.fs'

local PLAN = [[
local tb <close> = assert(qoslab.testbed { rate_bps = 1e9, impair = { delay_ms = 10 } })
local srv <close> = assert(qoslab.server { netns = tb.server_netns })
assert(qoslab.traffic.run { host = tb.server_addr, netns = tb.client_netns, duration_s = 3 })
]]

local SIGNO = { INT = 2, TERM = 15 }

local function netns_names()
  local _, out = H.sh('ip netns list')
  local t = {}
  for name in out:gmatch('(%S+)[^\n]*\n?') do t[#t + 1] = name end
  return t
end

local function names_of(pid)
  local t = {}
  for _, n in ipairs(netns_names()) do
    if n:find('-' .. pid .. '-', 1, true) then t[#t + 1] = n end
  end
  return t
end

-- A pid of a process that has ended.
local function dead_pid()
  local _, out = H.sh('sh -c \'echo $$\'')
  return assert(tonumber(out:match('%d+')))
end

describe('regress 034 an early signal stops the run and leaves nothing', function()
  local dir
  before_each(function()
    dir = H.tmp('r034-' .. tostring(math.random(1 << 30)))
    H.must('mkdir -p ' .. H.q(dir .. '/state'))
    local f = assert(io.open(dir .. '/plan.lua', 'w'))
    f:write(PLAN)
    f:close()
  end)
  after_each(function() H.cleanup_tmp() end)

  for _, sig in ipairs { 'INT', 'TERM' } do
    it('SIG' .. sig .. ' 0-60 ms after the start: exit ' .. (128 + SIGNO[sig]) .. ', no namespace, no record', function()
      for i = 0, 15 do
        local delay_s = i * 0.004
        -- started by argv: SIGINT not ignored as a shell's `&` would make it
        local p = assert(fs.process({ 'env', '-u', 'QOSLAB_BUILD', 'QOSLAB_STATE_DIR=' .. dir .. '/state',
          'bin/qoslab', 'run', '--host', '--out', dir .. '/o' .. i, dir .. '/plan.lua' },
          { stdout = dir .. '/out', stderr = dir .. '/err' }))
        local pid = p:pid()
        H.sleep(delay_s)
        p:kill(sig)
        local how, n = p:wait(20)
        if not how then p:close() end
        local err = H.read(dir .. '/err') or ''
        local what = string.format('SIG%s after %d ms: %s %s\n%s', sig, math.floor(delay_s * 1000),
          tostring(how), tostring(n), err)
        assert.is_truthy(how, 'still running 20 s after the signal: ' .. what)
        -- killed outright (the default action) only before anything is made
        local stopped = (how == 'exit' and n == 128 + SIGNO[sig]) or (how == 'signal' and n == SIGNO[sig])
        assert.is_true(stopped, what)
        assert.is_nil(err:find('interrupted!', 1, true), what)
        assert.is_nil(err:find('stack traceback', 1, true), what)
        assert.same({}, names_of(pid), what)
        assert.same({}, fs.list(dir .. '/state') or {}, what)
      end
    end)
  end

  it('qoslab cleanup takes unrecorded qoslab-named namespaces of an ended process only', function()
    local dead = dead_pid()
    local live = H.spawn('exec sleep 30')
    finally(function() H.kill(live) end)
    local gone = { string.format('qoslab-%d-1-c', dead), string.format('qoslab-%d-1', dead),
                   string.format('qoslab-probe-%d-4242', dead) }
    local kept = string.format('qoslab-%d-1-s', live)
    finally(function()
      for _, n in ipairs(gone) do os.execute('ip netns del ' .. n .. ' 2>/dev/null') end
      os.execute('ip netns del ' .. kept .. ' 2>/dev/null')
    end)
    for _, n in ipairs(gone) do H.must('ip netns add ' .. n) end
    H.must('ip netns add ' .. kept)
    local ok, out = H.sh('env -u QOSLAB_BUILD QOSLAB_STATE_DIR=' .. H.q(dir .. '/state') .. ' bin/qoslab cleanup')
    assert.is_true(ok, out)
    local now = {}
    for _, n in ipairs(netns_names()) do now[n] = true end
    for _, n in ipairs(gone) do
      assert.is_nil(now[n], n .. ' left behind:\n' .. out)
      assert.matches('removed netns ' .. n:gsub('%-', '%%-'), out)
    end
    assert.is_true(now[kept], 'the namespace of a running process was removed:\n' .. out)
  end)
end)
