-- qoslab.host without a network: the checks of a connection spec (each bad
-- field named), the quoting every remote argument goes through (a POSIX
-- shell gets back exactly the word), and localhost(), which runs the same
-- calls on this machine: arguments as they are, a timeout that stops the
-- command, no qoslab program as ENOENT naming the path.
local host = require 'qoslab.host'
local timer = require 'qoslab.timer'

describe('qoslab.host', function()
  it('names the bad field of a connection spec', function()
    local function err(spec)
      local ok, e = pcall(host, spec)
      assert.is_false(ok)
      return (tostring(e):gsub('^[^:]*:%d+: ', ''))
    end
    local ssh_expected = 'qoslab.host: ssh: expected "user@host" or "host" (no spaces, neither starting with "-"), got '
    assert.equal(ssh_expected .. '42', err { ssh = 42 })
    assert.equal(ssh_expected .. 'nil', err {})
    assert.equal(ssh_expected .. 'string "a b@c"', err { ssh = 'a b@c' })
    assert.equal(ssh_expected .. 'string "-oProxyCommand=x"', err { ssh = '-oProxyCommand=x' })
    assert.equal(ssh_expected .. 'string "a@b@c"', err { ssh = 'a@b@c' })
    assert.equal('qoslab.host: port: expected an integer in [1, 65535], got string "x"',
      err { ssh = 'u@h', port = 'x' })
    assert.equal('qoslab.host: port: expected an integer in [1, 65535], got 0', err { ssh = 'u@h', port = 0 })
    assert.equal('qoslab.host: options[2]: expected a "Key=Value" string (an ssh_config(5) option), '
      .. 'got string "-F /x"', err { ssh = 'u@h', options = { 'BatchMode=yes', '-F /x' } })
    assert.equal('qoslab.host: connect_timeout_s: expected a whole number of seconds in [1, 3600] '
      .. "(ssh's ConnectTimeout), got 1.5", err { ssh = 'u@h', connect_timeout_s = 1.5 })
    assert.equal('qoslab.host: timeout_s: expected a finite number in [0.001, 1000000.0], got 0',
      err { ssh = 'u@h', timeout_s = 0 })
    assert.matches('qoslab.host: spec.colour: unknown key %(known keys: connect_timeout_s, identity, name, '
      .. 'options, port, qoslab, ssh, timeout_s%)', err { ssh = 'u@h', colour = 'red' })
    -- the host after the "@" cannot pass for an ssh option either
    assert.equal(ssh_expected .. 'string "root@-oProxyCommand=x"', err { ssh = 'root@-oProxyCommand=x' })
    assert.equal('qoslab.host: identity: expected a private key file that exists, got string "/nonexistent/key"',
      err { ssh = 'u@h', identity = '/nonexistent/key' })
  end)

  it('raises a bad option at the caller\'s line, whatever the call', function()
    local h <close> = host.localhost()
    local here = debug.getinfo(1, 'S').short_src
    local function at_caller(fn, want)
      local ok, e = pcall(fn)
      assert.is_false(ok)
      assert.matches('^' .. here:gsub('%p', '%%%0') .. ':%d+: ' .. want, tostring(e))
    end
    at_caller(function() h:run({ 'true' }, { bogus = 1 }) end, 'qoslab.Host:run: opts.bogus: unknown key')
    at_caller(function() h:info { bogus = 1 } end, 'qoslab.Host:info: opts.bogus: unknown key')
    at_caller(function() h:shape_apply('lo', { kind = 'tbf', rate_bps = 1e6 }, { bogus = 1 }) end,
      'qoslab.Host:shape_apply: opts.bogus: unknown key')
    at_caller(function() h:clock_offset { bogus = 1 } end, 'qoslab.Host:clock_offset: opts.bogus: unknown key')
    at_caller(function() host { ssh = 'u@h', bogus = 1 } end, 'qoslab.host: spec.bogus: unknown key')
    at_caller(function() host.cleanup_dead { bogus = 1 } end, 'qoslab.host.cleanup_dead: opts.bogus: unknown key')
    at_caller(function() require('qoslab.hosts').clients { bogus = 1 } end,
      'qoslab.hosts.clients: opts.bogus: unknown key')
    -- a far host that begins with "-" would read as an option there
    at_caller(function() h:client { host = '-oProxyCommand=x' } end,
      'qoslab.Host:client: opts.host: expected a host name or address %(not starting with "%-"%)')
  end)

  it('quotes a word so that a POSIX shell gives it back unchanged', function()
    local words = { 'plain', 'a b', "it's", "''", '$HOME', '`id`', '$(id)', 'x;y', 'a|b', '"q"', '\\', '*',
                    '\n', '-n', '' }
    local quoted = {}
    for i, w in ipairs(words) do quoted[i] = host.shell_quote(w) end
    local p = io.popen("sh -c 'printf \"%s\\0\" \"$@\"' sh " .. table.concat(quoted, ' '))
    local out = p:read('a')
    p:close()
    local back = {}
    for w in out:gmatch('([^%z]*)%z') do back[#back + 1] = w end
    assert.same(words, back)
  end)

  it('localhost() runs the same calls on this machine', function()
    local here <close> = host.localhost()
    assert.equal(host['local'], host.localhost)
    local argv = { 'printf', '%s|', 'a b', "it's", '$x;', '' }
    assert.same({ status = 0, stdout = "a b|it's|$x;||", stderr = '' }, assert(here:run(argv)))
    assert.same({ status = 3, stdout = 'in\n', stderr = '' },
      assert(here:run({ 'sh', '-c', 'cat; exit 3' }, { stdin = 'in\n' })))
    local t0 = timer.now()
    local ok, msg, code = here:run({ 'sleep', '30' }, { timeout_s = 0.3 })
    local took = timer.now() - t0
    assert.is_nil(ok)
    assert.equal('ETIMEDOUT', code)
    assert.equal('localhost: run sleep timed out after 0.3 s (stopped there too); raise opts.timeout_s '
      .. '(or timeout_s of qoslab.host) if it needs longer', msg)
    assert(took >= 0.3 and took < 1.5, took)
    assert.has_error(function() here:run { 'a\0b' } end,
      'qoslab.Host:run: argv[1]: expected a string without NUL bytes, got string "a\\0b"')
    assert.has_error(function() here:run({ 'true' }, { timeout = 1 }) end)

    local missing <close> = host.localhost { qoslab = '/nonexistent/qoslab' }
    assert.same({ nil, 'localhost: qoslab is not installed on this machine (looked for /nonexistent/qoslab; '
      .. 'set qoslab = path, or qoslab run --remote-qoslab PATH)', 'ENOENT' }, { missing:info() })
    assert.same({}, here:cleanup())
    here:close()
    assert.has_error(function() here:run { 'true' } end, 'qoslab.Host:run: the handle is closed')
  end)
end)
