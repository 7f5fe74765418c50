-- Fake testbed and traffic engine for unit specs of the experiment layer:
-- throughput follows a simple model (min of link rate, window/RTT, Mathis
-- loss bound) so plans, reports and plots see realistic shapes without root.
local M = {}

M.log = {}

local function model_bps(impair, c)
  local rtt_s = math.max((impair.delay_ms or 0) / 1000, 0.0002)
  local window = c.window_bytes or c.sndbuf_bytes and math.min(c.sndbuf_bytes, 6291456) or 3145728
  local bps = math.min(940e6, window * 8 / rtt_s)
  local p = (impair.loss_pct or 0) / 100
  if p > 0 then bps = math.min(bps, 1448 * 8 * 1.22 / (rtt_s * math.sqrt(p))) end
  if c.proto == 'udp' then bps = c.bitrate_bps or 1e6 end
  return math.min(940e6, bps * (c.parallel or 1))
end
M.model_bps = model_bps

function M.install()
  M.log = {}
  local closed = { testbed = 0, server = 0 }
  M.closed = closed
  local tbmt = { __index = {}, __close = function(t) if not t.closed then t.closed = true closed.testbed = closed.testbed + 1 end end }
  tbmt.__index.impair = function(t, spec) t.spec = spec M.log[#M.log + 1] = { 'impair', spec } return true end
  tbmt.__index.close = tbmt.__close
  local drops = 0
  tbmt.__index.stats = function()
    drops = drops + 1
    return { client = { { kind = 'tbf', drops = 0 }, { kind = 'netem', drops = drops } }, server = {} }
  end
  package.loaded['qoslab.testbed'] = setmetatable({}, { __call = function(_, o)
    M.log[#M.log + 1] = { 'testbed', o }
    -- the backend a real testbed would say (QOSLAB_FAKE_BACKEND, default none given)
    return setmetatable({ client_netns = 'fake-c', server_netns = 'fake-s', client_ifname = 'veth-c', server_ifname = 'veth-s', client_addr = '10.0.0.1',
      server_addr = '10.0.0.2', spec = o.impair or {}, backend = os.getenv('QOSLAB_FAKE_BACKEND') }, tbmt)
  end })
  local testbed_of = {}
  M.testbed_of = testbed_of
  local srvmt = { __close = function(s) if not s.closed then s.closed = true closed.server = closed.server + 1 end end }
  local traffic = {
    server = function(o) M.log[#M.log + 1] = { 'server', o } return setmetatable({}, srvmt) end,
    run = function(c)
      M.log[#M.log + 1] = { 'client', c }
      local tb = M.current
      local spec = tb and tb.spec or {}
      local bps = model_bps(spec, c)
      local dur = c.duration_s or 10
      local bytes = math.floor(bps * dur / 8)
      local rtt_us = math.max((spec.delay_ms or 0) * 1000, 50)
      return {
        proto = c.proto or 'tcp', parallel = c.parallel or 1, duration_s = dur * 1.0,
        sent = { side = 'client', bytes = bytes, seconds = dur * 1.0, bits_per_second = bps, retransmits = 0 },
        received = { side = 'server', bytes = bytes, seconds = dur * 1.0, bits_per_second = bps,
                     lost_pct = 0.0, jitter_ms = 0.01, lost_packets = 0, duplicate_packets = 0,
                     out_of_order_packets = 0, unique_packets = 1000, packets = 1000 },
        streams = (function()
          local st, n = {}, c.parallel or 1
          for i = 1, n do
            st[i] = { id = i, sender = { max_snd_cwnd_bytes = math.floor(bps / n * rtt_us / 1e6 / 8),
                                         mean_rtt_us = rtt_us },
                      receiver = { bits_per_second = bps / n * (1 + 0.02 * (i - (n + 1) / 2) / n) } }
          end
          return st
        end)(),
        intervals = {}, warnings = {}, peer = 'qoslab',
      }
    end,
  }
  traffic.client = traffic.run
  package.loaded['qoslab.traffic'] = traffic
  local real = package.loaded['qoslab.testbed']
  package.loaded['qoslab.testbed'] = setmetatable({}, { __call = function(_, o)
    local tb = real(o)
    M.current = tb
    return tb
  end })
  package.loaded['qoslab'] = nil
end

function M.uninstall()
  package.loaded['qoslab.testbed'] = nil
  package.loaded['qoslab.traffic'] = nil
  package.loaded['qoslab'] = nil
  M.current = nil
end

return M
