-- qdisc change latency for netem: replacing a root netem on a veth in a
-- namespace made for the run, in-process (qoslab.netem.apply over rtnetlink)
-- against spawning `tc qdisc replace ... netem delay ...` for the same
-- change, in the same run.
--
--   bin/qoslab run bench/netem_change.lua [N]     (N changes each, default 200)
--
-- Every change alternates the delay between 10 and 20 ms so the kernel really
-- changes the qdisc each time. Latency per change is wall time around the
-- call (CLOCK_MONOTONIC); tc is started the way a Lua script would start it,
-- os.execute (sh -c 'exec tc ...'). netem.apply's time includes all it does
-- per call: checking the spec, the limit rule, reading the qdisc before (to
-- warn when it replaces a configured one), RTM_NEWQDISC replace, ACK, and
-- reading it back (to warn about fields the kernel did not take).
--
-- Where the kernel has no sch_netem (this project's development machines),
-- the script runs itself inside the VM guest with the project's harness
-- (lua/qoslab/vm/run-in-vm.sh, or the script named by $QOSLAB_VM_RUN) and
-- prints what the guest printed; without a harness it says so and skips.
-- Needs root.
local qoslab = require 'qoslab'
local netns, link, netem, timer = qoslab.netns, qoslab.link, qoslab.netem, qoslab.timer

local n = math.tointeger(tonumber((...) or '200'))
assert(n and n >= 10, 'usage: netem_change.lua [N >= 10]')

local ns = netns.unique_name('qlbench')
assert(netns.add(ns))
local ok, err = pcall(function()
  assert(link.add_veth { name = 'qlb0', peer = 'qlb1', netns = ns, peer_netns = ns })
  assert(link.set('qlb0', { up = true, netns = ns }))
  local o = { netns = ns, quiet = true }
  local delays = { 10, 20 }

  local r, msg, code = netem.apply('qlb0', { delay_ms = delays[1] }, o)
  if not r and code == 'ENOTSUP' then
    netns.delete(ns)
    local vm = os.getenv('QOSLAB_VM_RUN') or 'lua/qoslab/vm/run-in-vm.sh'
    local f = io.open(vm, 'r')
    if not f then
      print('netem_change: skipped: ' .. msg .. '; no VM harness at ' .. vm ..
        ' (set QOSLAB_VM_RUN to a run-in-vm.sh)')
      return
    end
    f:close()
    print('netem_change: no sch_netem here; running inside the VM guest (' .. vm .. ')')
    io.stdout:flush()
    local okv = os.execute(string.format("%s 'bin/qoslab run bench/netem_change.lua %d'", vm, n))
    if not okv then error('netem_change: the run in the VM guest failed', 0) end
    return
  end
  assert(r, msg)

  local function stats(t)
    table.sort(t)
    local function q(p) return t[math.max(1, math.ceil(p * #t))] end
    local sum = 0
    for _, v in ipairs(t) do sum = sum + v end
    return { median = q(0.5), p90 = q(0.9), mean = sum / #t, min = t[1], max = t[#t] }
  end

  -- Warm-up (first-time allocations, page faults, the state file).
  for i = 1, 5 do assert(netem.apply('qlb0', { delay_ms = delays[i % 2 + 1] }, o)) end
  local inproc = {}
  for i = 1, n do
    local spec = { delay_ms = delays[i % 2 + 1] }
    local t0 = timer.now_ns()
    assert(netem.apply('qlb0', spec, o))
    inproc[i] = (timer.now_ns() - t0) / 1e3
  end
  assert(netem.get('qlb0', { netns = ns }).delay_ms == delays[n % 2 + 1])

  local tc = {}
  for i = 1, n do
    local cmd = string.format('exec tc -n %s qdisc replace dev qlb0 root netem delay %dms', ns, delays[i % 2 + 1])
    local t0 = timer.now_ns()
    local okc = os.execute(cmd)
    tc[i] = (timer.now_ns() - t0) / 1e3
    assert(okc, 'tc failed: ' .. cmd)
  end
  -- tc's last change is what the kernel has now.
  assert(netem.get('qlb0', { netns = ns }).delay_ms == delays[n % 2 + 1])

  local a, b = stats(inproc), stats(tc)
  local kernel = io.open('/proc/sys/kernel/osrelease'):read('l')
  local cpu = io.open('/proc/cpuinfo'):read('a'):match('model name%s*:%s*([^\n]+)') or '?'
  print(string.format('qdisc change latency (netem delay replace on a veth), %d changes each, kernel %s, cpu %s',
    n, kernel, cpu))
  print(string.format('%-22s %10s %10s %10s %10s', 'method', 'median_us', 'p90_us', 'mean_us', 'max_us'))
  print(string.format('%-22s %10.1f %10.1f %10.1f %10.1f', 'qoslab.netem.apply', a.median, a.p90, a.mean, a.max))
  print(string.format('%-22s %10.1f %10.1f %10.1f %10.1f', 'os.execute tc replace', b.median, b.p90, b.mean, b.max))
  print(string.format('speed-up: %.1fx (median), %.1fx (p90); target >= 30x', b.median / a.median, b.p90 / a.p90))
end)
if netns.exists(ns) then netns.delete(ns) end
if not ok then error(err, 0) end
