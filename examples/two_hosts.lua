-- two_hosts.lua: TCP throughput against one-way delay between two machines,
-- the reference experiment as it was first run: netem on the client host's
-- egress, a qoslab server on the server host, one TCP stream per point.
--
-- Shows: with no delay the path's rate; with delay, one stream with the
-- kernel's default window follows window / RTT. The table puts the measured
-- throughput beside the sender's mean RTT (TCP_INFO, at least the delay:
-- netem holds every data packet that long), its largest congestion window
-- over that RTT (the bound throughput stays under) and the retransmits.
--
-- Run with two machines (each with qoslab installed, reachable over ssh with
-- a key, root on the client host for netem, kernel sch_netem there):
--
--   bin/qoslab run examples/two_hosts.lua --host-map client=root@10.0.0.1 \
--     --host-map server=lab@10.0.0.2 [--ssh-identity ~/.ssh/id_ed25519] \
--     [--remote-qoslab /opt/qoslab/bin/qoslab] [--quick] [--out DIR] \
--     [-- dev=eth1 server_addr=192.168.7.2 delays_ms=0,10,50,100]
--
-- `server_addr` is where the client host reaches the server over the path
-- measured (default: the server's --host-map address); `dev` the client
-- host's device toward it (default: the device of the client host's route to
-- server_addr); `delays_ms` the one-way delays swept (default 0,10,50,100).
-- Without --host-map both roles are this machine, `dev` then
-- being lo: netem on this machine's loopback for the run. Every change
-- (the netem qdisc, the server) is undone when the run ends, fails or is
-- interrupted (to-be-closed host handles); after a kill -9,
-- `qoslab cleanup --hosts` undoes it.
-- Files: DIR/results.jsonl, two_hosts.csv/.json, meta.json with each host's metadata.
local qoslab = require 'qoslab'
local plan, report = qoslab.plan, qoslab.report
local run = QOSLAB_RUN or {}
local quick = run.quick or os.getenv('QOSLAB_QUICK') == '1'
local out = run.out or 'results/two_hosts'

-- Plan arguments: KEY=VALUE words after `--`.
local args = {}
for _, a in ipairs { ... } do
  local k, v = tostring(a):match('^([%w_]+)=(.+)$')
  if k ~= 'dev' and k ~= 'server_addr' and k ~= 'delays_ms' then
    error(string.format('two_hosts.lua: argument %q: expected dev=IFNAME, server_addr=ADDR or delays_ms=D1,D2,...',
      tostring(a)), 0)
  end
  args[k] = v
end

local delays_ms = { 0, 10, 50, 100 }
if args.delays_ms then
  delays_ms = {}
  for d in args.delays_ms:gmatch('[^,]+') do
    local n = math.tointeger(tonumber(d))
    if not n or n < 0 or n > 10000 then
      error(string.format('two_hosts.lua: delays_ms=%s: expected whole milliseconds 0-10000, comma-separated',
        args.delays_ms), 0)
    end
    delays_ms[#delays_ms + 1] = n
  end
end
local duration_s = quick and 2 or 10

local client <close> = assert(qoslab.hosts.get('client'))
local server <close> = assert(qoslab.hosts.get('server'))

-- Where the client reaches the server: the argument, else the server's
-- mapped address (user and brackets dropped), else this machine.
local server_addr = args.server_addr
if not server_addr then
  local mapped = (qoslab.hosts.configured() or { roles = {} }).roles.server
  server_addr = mapped and mapped.ssh:gsub('^.*@', '') or '127.0.0.1'
end

-- The client host's device toward the server: its route's.
local dev = args.dev
if not dev then
  local r = assert(client:run({ 'ip', '-o', 'route', 'get', server_addr }, { timeout_s = 10 }))
  dev = r.status == 0 and r.stdout:match(' dev (%S+)')
  if not dev then
    error(string.format('two_hosts.lua: no route to %s on the client host (%s): pass dev=IFNAME and '
      .. 'server_addr=ADDR after --', server_addr, (r.stderr or ''):gsub('%s+$', '')), 0)
  end
end
print(string.format('two_hosts: netem on the client host\'s %s, server at %s', dev, server_addr))

local srv <close> = assert(server:server { port = 0 })
local port = srv:port()

local summary = plan.sweep {
  name = 'two hosts: delay sweep', params = { delay_ms = delays_ms },
  meta = { dev = dev, server_addr = server_addr },
  run = function(p)
    -- limit_packets = "auto": netem's queue must hold rate x delay, or netem
    -- itself drops (sized from the device's link speed).
    local ok, err, code = client:netem_apply(dev, { delay_ms = p.delay_ms, limit_packets = 'auto' })
    if not ok then return nil, err, code end
    -- Slow start needs several RTTs: long delays get longer runs (not
    -- under --quick). TCP_INFO is read every interval.
    local rtt_s = p.delay_ms / 1000
    return client:client { host = server_addr, port = port, proto = 'tcp', interval_s = 0.5,
      duration_s = quick and duration_s or math.max(duration_s, math.ceil(40 * rtt_s)),
      connect_timeout_s = math.max(10, math.ceil(8 * rtt_s)) }
  end,
}
assert(client:netem_clear(dev))

local function sender(e)
  local r = e.results and e.results[#e.results]
  return r and r.streams and r.streams[1] and r.streams[1].sender, r
end
io.write(report.series(summary, {
  title = string.format('TCP throughput vs one-way delay (netem on the client host\'s %s, one stream, '
    .. 'default window)', dev),
  extra = {
    { header = 'mean RTT ms', value = function(e)
        local s = sender(e)
        return s and s.mean_rtt_us and string.format('%.2f', s.mean_rtt_us / 1000) end },
    { header = 'max cwnd/RTT Mbit/s', value = function(e)
        local s = sender(e)
        if not (s and s.max_snd_cwnd_bytes and s.mean_rtt_us and s.mean_rtt_us > 0) then return nil end
        return string.format('%.3g', s.max_snd_cwnd_bytes * 8 / (s.mean_rtt_us / 1e6) / 1e6) end },
    { header = 'retransmits', value = function(e)
        local _, r = sender(e)
        return r and r.sent and r.sent.retransmits end },
  },
}))
report.write_csv(out .. '/two_hosts.csv', summary)
report.write_json(out .. '/two_hosts.json', summary)
