-- 023: a one-off server (one_off, `qoslab server -1`) ended on the first
-- control connection that closed, served or not: a peer that sent a good
-- cookie and left, or parameters the server refused ({"time": -5}), made it
-- stop (the CLI exited 0 having served nothing) and the real client that
-- came next got "Connection refused". Now only a test whose parameters were
-- accepted and that got to TEST_START ends a one-off server; refused
-- connections are counted and logged, and the server keeps serving.
local traffic = require 'qoslab.traffic'
local H = require 'integration.traffic_helper'

local COOKIE = 'abcdefghijklmnopqrstuvwxyz2345672345\\000'  -- 36 chars of a-z2-7, NUL

-- Connect, send `payload` (a printf format), read until the server closes
-- (at most 5 s), and hang up.
local function stray(port, payload)
  return H.sh(string.format(
    "bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && printf %s >&3 && timeout 5 cat <&3 >/dev/null'",
    port, H.q(payload):gsub("'", "'\\''")))
end

-- Wait (at most 3 s) until the server counted n rejected connections.
local function rejected(srv, n)
  local t0 = H.now()
  while srv:rejected() < n and H.now() - t0 < 3 do H.sleep(0.02) end
  return srv:rejected()
end

describe('regress 023 a one-off server and stray peers', function()
  it('keeps serving after refused connections and ends after the first real test', function()
    local port = H.port()
    local srv = assert(traffic.server { port = port, bind_address = '127.0.0.1', one_off = true,
      idle_timeout_s = 1 })
    finally(function() srv:stop() end)
    local peers = {
      COOKIE,                                                -- a cookie, then gone
      COOKIE .. '\\000\\000\\000\\026{"tcp":true,"time":-5}',  -- parameters refused
      COOKIE .. '\\000\\000\\000\\014{"tcp":tru}}',            -- parameters malformed
    }
    for i, payload in ipairs(peers) do
      stray(port, payload)
      assert.equal(i, rejected(srv, i), 'stray peer ' .. i .. ' was not counted as rejected')
      assert.is_false(srv:done(), 'the one-off server ended after stray peer ' .. i)
      assert.equal(0, srv:finished())
    end
    local r, msg, code = traffic.run { host = '127.0.0.1', port = port, duration_s = 0.5,
      bitrate_bps = 20e6, connect_timeout_s = 5 }
    assert(r, tostring(msg) .. ' (' .. tostring(code) .. ')')
    assert.is_true(r.received.bytes > 0)
    local t0 = H.now()
    while not srv:done() and H.now() - t0 < 3 do H.sleep(0.02) end
    assert.is_true(srv:done(), 'the one-off server did not end after its test')
    assert.equal(1, srv:finished())
  end)
end)
