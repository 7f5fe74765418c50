-- 022: a forward TCP client hung 10 s when the server ended its test. With a
-- server's max_duration_s 5 and a byte-limited test too big to finish
-- (-n 2000G, also -P 4), the last interval came at 5.02 s but the error at
-- 15.02 s: the server said SERVER_TERMINATE, yet each sender still pushed
-- the rest of its reservation into a peer that read no more and then waited
-- (capped at 10 s) for acknowledgements that never came. Now an error of
-- the control exchange stops the senders at once (they drop what is left,
-- wait for no ack, and shutdown() wakes a blocked one): the call returns
-- nil, message, CODE right after the server's limit, the message once.
local H = require 'integration.traffic_helper'
local traffic = require 'qoslab.traffic'

local LIMIT_S = 2

describe('regress 022 the server ends a byte-limited TCP test', function()
  for _, o in ipairs {
    { parallel = 1 }, { parallel = 4 }, { parallel = 1, reverse = true },
  } do
    it(string.format('-P %d%s: the client returns within 1.5 s of the limit', o.parallel,
      o.reverse and ' -R' or ''), function()
      local port = H.port()
      local srv <close> = assert(traffic.server { port = port, max_duration_s = LIMIT_S })
      local t0 = H.now()
      local res, msg, code = traffic.run { host = '127.0.0.1', port = port, bytes = 2000e9,
        parallel = o.parallel, reverse = o.reverse }
      local took = H.now() - t0
      assert.is_nil(res)
      assert.equal('ECONNABORTED', code)
      assert.is_string(msg)
      assert(msg:find('max_duration_s', 1, true), msg)
      local _, n = msg:gsub('max_duration_s', '')
      assert.equal(1, n, 'the reason once: ' .. msg)
      assert(took >= LIMIT_S - 0.1, string.format('returned at %.2f s, before the limit', took))
      assert(took < LIMIT_S + 1.5, string.format('returned at %.2f s', took))
    end)
  end
end)
