-- The metadata of a run on the real testbed (root, veth namespaces, tbf; no
-- netem needed): `qoslab run` writes DIR/meta.json while the plan's testbed
-- is up, so it holds the path's own qdiscs (tbf and its rate), offloads
-- (off, as the testbed sets them) and the sysctls read inside the client's
-- namespace; `qoslab report DIR1 DIR2` labels two runs by the sysctl a plan
-- changed in that namespace, and every image of both pages loads in
-- headless Chromium.
local meta = require 'qoslab.meta'

local function tmpdir()
  local p = assert(io.popen('mktemp -d /tmp/qoslab-meta-int.XXXXXX'))
  local d = p:read('l')
  p:close()
  return d
end

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function slurp(path)
  local f = io.open(path, 'rb')
  if not f then return nil end
  local s = f:read('a')
  f:close()
  return s
end

local function sh(cmd)
  local p = assert(io.popen('(' .. cmd .. ') 2>&1; echo "exit $?"'))
  local out = p:read('a')
  p:close()
  return tonumber(out:match('exit (%d+)\n$')), out
end

-- One point of 1 s over a 100 Mbit/s tbf, with the client namespace's
-- congestion control set to the plan's argument first.
local PLAN = [[
local cc = ...
local tb <close> = assert(qoslab.testbed { backend = 'netem', rate_bps = 100e6 })
local srv <close> = assert(qoslab.server { netns = tb.server_netns })
assert(qoslab.netns.run(tb.client_netns, function()
  local f = assert(io.open('/proc/sys/net/ipv4/tcp_congestion_control', 'w'))
  assert(f:write(cc))
  assert(f:close())
  return true
end))
local s = qoslab.plan.sweep { name = 'rate', params = { parallel = { 1, 2 } }, progress = false,
  run = function(p)
    return qoslab.traffic.run { host = tb.server_addr, netns = tb.client_netns, duration_s = 1,
                                parallel = p.parallel, congestion = cc }
  end }
assert(qoslab.plot.sweep_lines(s, { out = QOSLAB_RUN.out .. '/rate', x = 'parallel', logx = false,
  title = 'TCP over a 100 Mbit/s tbf (' .. cc .. ')', xlabel = 'parallel streams' }))
]]

local function chromium_counts(dir, page)
  local profile = dir .. '/profile'
  local _, out = sh(string.format('timeout 120 /usr/bin/chromium --headless --no-sandbox --disable-gpu '
    .. '--disable-background-networking --disable-component-update --disable-sync --no-first-run '
    .. '--user-data-dir=%s --virtual-time-budget=10000 --dump-dom %s 2>/dev/null', q(profile), q('file://' .. page)))
  os.execute('rm -rf ' .. q(profile))
  return tonumber(out:match('<body[^>]-data%-images="(%d+)"')),
    tonumber(out:match('<body[^>]-data%-images%-loaded="(%d+)"')), out
end

describe('qoslab run metadata on the real testbed', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute('rm -rf ' .. q(dir)) end)

  it('meta.json holds the path\'s qdiscs, offloads and the client namespace\'s sysctls', function()
    -- A namespace other than the first may choose only the allowed ones.
    local avail = slurp('/proc/sys/net/ipv4/tcp_allowed_congestion_control') or ''
    local other
    for name in avail:gmatch('%S+') do if name ~= 'reno' then other = other or name end end
    if not other then pending('only reno is available: no second congestion control to compare') return end
    local plan_file = dir .. '/cc.lua'
    local f = assert(io.open(plan_file, 'w'))
    f:write(PLAN)
    f:close()
    for _, cc in ipairs { 'reno', other } do
      local rc, out = sh('lua5.4 bin/qoslab run ' .. q(plan_file) .. ' --host --out ' .. q(dir .. '/' .. cc)
        .. ' -- ' .. cc)
      assert.equal(0, rc, out)
      assert.matches('qoslab run: report ' .. dir .. '/' .. cc .. '/index.html', out, 1, true)
    end
    local m = assert(meta.read(dir .. '/reno'))
    assert.equal('host', m.where)
    assert.equal('netem', m.backend)
    assert.equal('netem', m.paths[1].backend)
    assert.equal(2, #m.paths)
    local client, server = m.paths[1], m.paths[2]
    assert.equal('client', client.role)
    assert.equal('server', server.role)
    assert.matches('^qoslab%-%d+%-%d+%-c$', client.netns)
    assert.equal('reno', client.sysctls['net.ipv4.tcp_congestion_control'])
    assert.equal((slurp('/proc/sys/net/ipv4/tcp_congestion_control'):gsub('%s+$', '')),
      m.sysctls['net.ipv4.tcp_congestion_control'])
    for _, p in ipairs { client, server } do
      local i = p.interfaces[1]
      assert.equal('veth', i.kind)
      assert.equal(1500, i.mtu_bytes)
      assert.same({ tso = false, gso = false, gro = false }, i.offloads)
      assert.equal('tbf', i.qdiscs[1].kind)
      assert.equal('root', i.qdiscs[1].parent)
      assert.equal(100e6, i.qdiscs[1].spec.rate_bps)
    end
    local page = slurp(dir .. '/reno/index.html')
    assert.matches('tbf 1: (parent root): rate 100 Mbit/s, burst 50000 B', page, 1, true)
    assert.matches('tso off, gso off, gro off', page, 1, true)
    assert.matches('<img src="rate.png"', page, 1, true)
    -- The comparison: labelled by the client's congestion control.
    local rc, out = sh('lua5.4 bin/qoslab report ' .. q(dir .. '/reno') .. ' ' .. q(dir .. '/' .. other)
      .. ' --out ' .. q(dir .. '/cmp'))
    assert.equal(0, rc, out)
    local gp = slurp(dir .. '/cmp/01-rate.gp')
    assert.matches("title 'client tcp_congestion_control=reno'", gp, 1, true)
    assert.matches("title 'client tcp_congestion_control=" .. other .. "'", gp, 1, true)
    if not io.open('/usr/bin/chromium', 'r') then
      pending('chromium is not installed (make deps installs it): the images were not loaded in a browser')
      return
    end
    for _, p in ipairs { dir .. '/reno/index.html', dir .. '/cmp/index.html' } do
      local total, ok, dom = chromium_counts(dir, p)
      assert.equal(1, total, dom)
      assert.equal(1, ok, dom)
    end
  end)
end)
