-- 031: after a stall the receiver's rows and its [SUM] row disagreed. A
-- client stopped for 1 s (SIGSTOP) ticks late: one interval lasts ~1.4 s
-- (1.00-2.40) and the next ~0.6 s, while the server's slots, folded into
-- them by grid slot, last 1 s each and keep their own seconds (each end's
-- rows are its own measurement). The receiver rows said "1.11 GBytes 9.53
-- Gbits/sec" under 1.00-2.39 without saying that 9.53 is over 1 s, and the
-- text's [SUM] row re-summed the bytes over the interval's 1.39 s: 15.7
-- where the rows added up to 21.9 and --plot, which draws the engine's SUM
-- entry, showed 21.85. Now the [SUM] row is the engine's SUM entry and a
-- row over other seconds than its interval's says "(over 1.00 s)".
-- Here: a 3 s, 2-stream TCP test whose client process is stopped at 1.4 s
-- for 1 s; each receiver row's rate is its bytes over the seconds it
-- shows, and the rows of each interval add up to the receiver's [SUM].
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'

local UNIT = { Bytes = 1, KBytes = 1024, MBytes = 1024 ^ 2, GBytes = 1024 ^ 3, TBytes = 1024 ^ 4 }
local RATE = { ['bits/sec'] = 1, ['Kbits/sec'] = 1e3, ['Mbits/sec'] = 1e6, ['Gbits/sec'] = 1e9 }

-- the live interval rows of the client's output: id, span, bytes, rate,
-- role and the seconds the rate is over (the span's unless it says)
local function rows(text)
  local out = {}
  for l in text:gmatch('[^\n]+') do
    local id, a, b, n, u, r, ru, rest = l:match(
      '^%[%s*(%w+)%] fwd%s+([%d.]+)%-([%d.]+)%s+s%s+([%d.]+) (%a+)%s+([%d.]+) (%S+)(.*)$')
    local role = rest and (rest:match('%f[%a](sender)%f[%A]') or rest:match('%f[%a](receiver)%f[%A]'))
    if id and role then
      local over = rest:match('%(over ([%d.]+) s%)')
      out[#out + 1] = { id = id, start_s = tonumber(a), end_s = tonumber(b),
        bytes = tonumber(n) * UNIT[u], bps = tonumber(r) * RATE[ru], role = role,
        seconds = over and tonumber(over) or (tonumber(b) - tonumber(a)) }
    end
  end
  return out
end

describe('regress 031 after a stall the rows say their seconds and add up to [SUM]', function()
  it('TCP, 2 streams, the client stopped for 1 s', function()
    local port = H.port()
    local srv = assert(traffic.server { port = port })
    local log = H.tmp('031-client.log')
    local p
    local ok, err = pcall(function()
      -- the plain build: a sanitizer build's module loads only into the suites'
      -- own Lua host, not into bin/qoslab
      p = H.spawn(string.format('exec env -u QOSLAB_BUILD lua5.4 bin/qoslab client 127.0.0.1 -p %d -t 3 -P 2',
        port), log)
      H.sleep(1.4)
      H.must('kill -STOP ' .. p)
      H.sleep(1.0)
      H.must('kill -CONT ' .. p)
      assert(H.wait_exit(p, 15), 'the client did not end')
      local rs = rows(H.read(log))
      local long, recv = 0, 0
      local by_span = {}
      for _, r in ipairs(rs) do
        local key = string.format('%.2f', r.start_s)
        by_span[key] = by_span[key] or { rx = {}, sum = nil }
        local secs = r.seconds
        if r.end_s - r.start_s > 1.2 then long = long + 1 end
        if r.role == 'receiver' then
          recv = recv + 1
          -- 3 significant digits in bytes and rate, 2 decimals in the span
          H.close_to(r.bps, r.bytes * 8 / secs, 0.02 + 0.011 / secs,
            string.format('receiver [%s] %.2f-%.2f: rate of its bytes over %.2f s', r.id,
              r.start_s, r.end_s, secs))
          if r.id == 'SUM' then by_span[key].sum = r.bps
          else by_span[key].rx[#by_span[key].rx + 1] = r.bps end
        end
      end
      assert(long > 0, 'no interval longer than 1.2 s: the stall did not happen\n' .. H.read(log))
      assert(recv > 0, 'no receiver rows\n' .. H.read(log))
      for key, g in pairs(by_span) do
        if g.sum then
          local s = 0
          for _, v in ipairs(g.rx) do s = s + v end
          H.close_to(s, g.sum, 0.02, 'interval at ' .. key .. ': receiver rows add up to [SUM]')
        end
      end
    end)
    if p and H.alive(p) then
      os.execute('kill -CONT ' .. p .. ' 2>/dev/null')
      H.kill(p)
    end
    srv:close()
    os.remove(log)
    if not ok then error(err, 0) end
  end)
end)
