-- Busted output handler: the usual terminal output, plus the counts of this
-- run written to $QOSLAB_COUNTS as "passed failed skipped" so that
-- spec/support/test-all.sh can sum every suite into one line.
-- Under the TSan host (spec/support/san-lua.c) every ThreadSanitizer report
-- is a failure too, charged to the test that was running when it appeared.
-- A spec file that leaves a network namespace (/run/netns) or a network
-- device of this namespace (/sys/class/net) behind that was not there when
-- it began is a failure too, charged to that file and naming what it left.
-- On a machine others use at the same time, what appeared may be theirs:
-- only names with this process's pid count then; with QOSLAB_LEAK_CHECK=all
-- (CI, which has the machine to itself) every new name counts.
return function(options)
  local busted = require 'busted'
  local handler = require 'busted.outputHandlers.utfTerminal'(options)
  local have_san, san = pcall(require, 'san_host')
  local tsan = have_san and san.tsan
  local raced, seen = 0, 0
  local leaked = 0
  local have_lfs, lfs = pcall(require, 'lfs')

  -- The names in the places a test's namespaces and devices live.
  local function names()
    local out = {}
    if not have_lfs then return out end
    for _, dir in ipairs { '/run/netns', '/sys/class/net' } do
      local ok, iter, obj = pcall(lfs.dir, dir)
      if ok then
        for name in iter, obj do
          if name ~= '.' and name ~= '..' then out[dir .. '/' .. name] = true end
        end
      end
    end
    return out
  end
  local at_start = {}
  local all_names = os.getenv('QOSLAB_LEAK_CHECK') == 'all'
  local my_pid -- a pattern: this process's pid as a whole number in a name
  do
    local f = io.open('/proc/self/stat')
    local pid = f and f:read('l'):match('^(%d+)')
    if f then f:close() end
    if pid then my_pid = '%f[%d]' .. pid .. '%f[%D]' end
  end
  busted.subscribe({ 'file', 'start' }, function()
    at_start = names()
    return nil, true
  end)
  busted.subscribe({ 'file', 'end' }, function(element)
    local left = {}
    for name in pairs(names()) do
      if not at_start[name] and (all_names or (my_pid and name:find(my_pid))) then left[#left + 1] = name end
    end
    if #left > 0 then
      table.sort(left)
      leaked = leaked + 1
      io.stderr:write(string.format('\nleft behind by %s: %s\n', element.name or '?',
        table.concat(left, ' ')))
    end
    return nil, true
  end)

  local function charge(name)
    local now = san.reports()
    if now > seen then
      raced = raced + 1
      io.stderr:write(string.format('\nThreadSanitizer: %d report(s) during %s\n',
        now - seen, name))
      seen = now
    end
    return nil, true
  end

  local function write_counts()
    if tsan then charge('the suite, outside any test') end
    local path = os.getenv('QOSLAB_COUNTS')
    if not path then return nil, true end
    local f = assert(io.open(path, 'w'))
    f:write(string.format('%d %d %d\n', handler.successesCount,
      handler.failuresCount + handler.errorsCount + raced + leaked, handler.pendingsCount))
    f:close()
    return nil, true
  end
  if tsan then
    busted.subscribe({ 'test', 'start' }, function() return charge('setup before a test') end)
    busted.subscribe({ 'test', 'end' }, function(element)
      return charge(handler.getFullName(element))
    end)
  end
  busted.subscribe({ 'suite', 'end' }, write_counts, { priority = 1 })
  return handler
end
