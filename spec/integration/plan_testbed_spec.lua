-- The experiment layer on the real testbed and traffic engine (root, veth
-- namespaces, tbf rate limit; no netem needed): a sweep measures what the
-- link allows, and interrupted runs (SIGINT, SIGTERM, kill -9 + cleanup)
-- leave no namespace, link or qdisc behind.
--
-- These specs need qoslab.testbed and qoslab.traffic from the other branches.
-- They FAIL, naming the missing module, until those are merged.
local timer = require 'qoslab.timer'

local function need(name)
  local ok, m = pcall(require, name)
  if not ok then
    error('plan integration specs need ' .. name
      .. ' (merge the testbed and traffic branches first): ' .. tostring(m), 2)
  end
  return m
end

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function slurp(path)
  local f = io.open(path, 'rb')
  if not f then return nil end
  local s = f:read('a')
  f:close()
  return s
end

local function tmpdir()
  local p = assert(io.popen('mktemp -d /tmp/qoslab-plan-int.XXXXXX'))
  local d = p:read('l')
  p:close()
  return d
end

local function netns_list()
  local p = assert(io.popen('ip netns list 2>/dev/null'))
  local s = p:read('a')
  p:close()
  return s
end

local function links()
  local p = assert(io.popen('ip -o link show 2>/dev/null'))
  local s = p:read('a')
  p:close()
  return s
end

-- A plan that writes its testbed's names, then sweeps slowly.
local SLOW_PLAN = [[
local tb <close> = assert(qoslab.testbed { rate_bps = 100e6 })
local srv <close> = assert(qoslab.server { netns = tb.server_netns })
local f = assert(io.open(QOSLAB_RUN.out .. '/names', 'w'))
f:write(tb.client_netns, '\n', tb.server_netns, '\n', tb.client_ifname or '', '\n', tb.server_ifname or '', '\n')
f:close()
qoslab.plan.sweep { name = 'slow', params = { parallel = { 1, 1, 1, 1, 1, 1 } }, repeat_count = 1,
  run = function(p)
    return qoslab.traffic.run { host = tb.server_addr, netns = tb.client_netns, duration_s = 1,
                           parallel = p.parallel }
  end }
]]

local function start_plan(dir, extra)
  local plan_file = dir .. '/slow.lua'
  local f = assert(io.open(plan_file, 'w'))
  -- Distinct points so each is recorded: parallel 1..6.
  f:write((SLOW_PLAN:gsub('{ 1, 1, 1, 1, 1, 1 }', '{ 1, 2, 3, 4, 5, 6 }')))
  f:close()
  os.execute(string.format('sh -c %s &', q(string.format(
    'bin/qoslab run %s --host --out %s %s >%s 2>&1 & echo $! >%s; wait $!; echo $? >%s',
    q(plan_file), q(dir .. '/o'), extra or '', q(dir .. '/log'), q(dir .. '/pid'), q(dir .. '/rc')))))
  local t0 = timer.now()
  while not (slurp(dir .. '/o/results.jsonl') or ''):find('\n') and timer.now() - t0 < 60 do
    if (slurp(dir .. '/rc') or ''):find('\n') then break end
    timer.sleep(0.05)
  end
  assert.is_truthy((slurp(dir .. '/o/results.jsonl') or ''):find('\n'),
    'the plan recorded no point: ' .. tostring(slurp(dir .. '/log')))
  local names = {}
  for l in (slurp(dir .. '/o/names') or ''):gmatch('[^\n]+') do names[#names + 1] = l end
  return assert(tonumber(slurp(dir .. '/pid'))), names
end

local function wait_rc(dir)
  local t0 = timer.now()
  while not (slurp(dir .. '/rc') or ''):find('\n') and timer.now() - t0 < 60 do timer.sleep(0.05) end
  return tonumber(slurp(dir .. '/rc'))
end

local function assert_gone(names)
  local ns, ln = netns_list(), links()
  for _, n in ipairs(names) do
    if n ~= '' then
      assert.is_nil(ns:find(n, 1, true), 'namespace ' .. n .. ' left behind')
      assert.is_nil(ln:find(n, 1, true), 'link ' .. n .. ' left behind')
    end
  end
end

describe('plan on the real testbed', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute('rm -rf ' .. q(dir)) end)

  it('a sweep measures the rate-limited link and records every point', function()
    need('qoslab.testbed')
    need('qoslab.traffic')
    local qoslab = require 'qoslab'
    local rate = 100e6
    local names
    do
      local tb <close> = assert(qoslab.testbed { rate_bps = rate })
      local srv <close> = assert(qoslab.server { netns = tb.server_netns })
      names = { tb.client_netns, tb.server_netns }
      local s = qoslab.plan.sweep { name = 'int', out = dir, progress = false,
        params = { parallel = { 1, 2 } }, repeat_count = 2,
        run = function(p)
          return qoslab.traffic.run { host = tb.server_addr, netns = tb.client_netns, duration_s = 2,
                                 parallel = p.parallel }
        end }
      for _, p in ipairs(s.points) do
        assert.equal(2, p.n)
        -- TCP goodput under a 100 Mbit/s tbf: headers cost about 5 %.
        assert.is_true(p.mean > 0.8 * rate and p.mean < 1.02 * rate,
          'mean ' .. p.mean .. ' outside 80-102 % of the rate')
        assert.is_table(p.results[1].received)
      end
      local recs = assert(qoslab.plan.load(dir .. '/results.jsonl', 'int'))
      assert.equal(2, #recs)
      assert.equal('host', recs[1].where)
      assert.equal(tb.backend, recs[1].backend)
    end
    collectgarbage()
    assert_gone(names)
  end)

  -- SIGHUP (terminal or SSH session closed) exited 129 leaving the testbed's
  -- namespaces and the state file: it unwinds as SIGTERM does.
  for _, sig in ipairs { { 'INT', 130 }, { 'TERM', 143 }, { 'HUP', 129 } } do
    it('SIG' .. sig[1] .. ' mid-sweep: exit ' .. sig[2] .. ', nothing of the run remains', function()
      need('qoslab.testbed')
      need('qoslab.traffic')
      local pid, names = start_plan(dir)
      assert.is_true(#names >= 2)
      os.execute('kill -' .. sig[1] .. ' ' .. pid)
      assert.equal(sig[2], wait_rc(dir), slurp(dir .. '/log'))
      assert_gone(names)
    end)
  end

  it('kill -9 mid-sweep, then qoslab cleanup removes what was left; --resume finishes', function()
    need('qoslab.testbed')
    need('qoslab.traffic')
    local pid, names = start_plan(dir)
    os.execute('kill -9 ' .. pid)
    wait_rc(dir)
    local p = assert(io.popen('bin/qoslab cleanup 2>&1'))
    local out = p:read('a')
    p:close()
    assert.matches(names[1], out, 1, true)
    assert_gone(names)
    -- Resume: the points recorded before the kill are not run again.
    local before = 0
    for _ in io.lines(dir .. '/o/results.jsonl') do before = before + 1 end
    os.remove(dir .. '/rc')
    start_plan(dir, '--resume')
    assert.equal(0, wait_rc(dir), slurp(dir .. '/log'))
    local recs = assert(require('qoslab.plan').load(dir .. '/o/results.jsonl', 'slow'))
    local seen = {}
    for _, r in ipairs(recs) do
      assert.is_nil(seen[r.params.parallel], 'point parallel=' .. r.params.parallel .. ' recorded twice')
      seen[r.params.parallel] = true
    end
    assert.equal(6, #recs)
    assert.is_true(before >= 1)
  end)
end)
