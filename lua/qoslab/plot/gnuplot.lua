--- The gnuplot machinery the plot modules share: string literals for a
-- script, the terminals, and `render`, which writes a script and runs
-- gnuplot once for all formats (by argv, no shell), and the rules of an
-- output path. Not an API for scripts: `qoslab.plot`, its submodules and
-- `qoslab client --plot` stand on it.
-- @module qoslab.plot.gnuplot
local check = require 'qoslab.check'
local fs = require 'qoslab.fs'

local M = {}

-- gnuplot string literal (single quotes; a quote is doubled).
-- A gnuplot string literal. Single quotes take everything literally (no
-- backquote command substitution, no escapes) but cannot hold a line break;
-- a string with control bytes is written double-quoted with every byte but
-- letters and "./_-" as an octal escape (a raw backquote there would run a
-- command). Digits are escaped too: gnuplot reads an escape's octal digits
-- on past three, so "to\04010.9" (a space, then "10.9") drew one huge
-- glyph instead.
local function gq(s)
  s = tostring(s)
  if not s:find('%c') then return "'" .. s:gsub("'", "''") .. "'" end
  return '"' .. s:gsub('[^%a%./_%-]', function(c) return string.format('\\%03o', c:byte()) end) .. '"'
end

-- Text for a comment line: control bytes as \ddd.
local function comment_text(s)
  return (tostring(s):gsub('[%c\\]', function(c) return string.format('\\%03d', c:byte()) end))
end

-- A path as a program argument: a relative one starting with "-" would be
-- taken for an option.
local function arg_path(p)
  if p:sub(1, 1) == '-' then return './' .. p end
  return p
end

local found -- cached {path = ..., pngcairo = bool} per PATH
local found_for

--- Locate gnuplot on PATH.
-- @treturn string|nil absolute path
-- @treturn boolean whether the pngcairo terminal exists
function M.gnuplot()
  local path_env = os.getenv('PATH') or ''
  if found_for == path_env and found then return found.path, found.pngcairo end
  found, found_for = nil, path_env
  local path = fs.which('gnuplot')
  if not path then return nil end
  local how, status = fs.run({ path, '-e', 'set terminal pngcairo' }, { output = '/dev/null' })
  found = { path = path, pngcairo = how == 'exit' and status == 0 }
  return found.path, found.pngcairo
end

-- A plot's file, as fs.write_file writes it; a missing folder is the
-- caller's to make (a plot makes none, as `qoslab client --plot` makes
-- none), and the message says so.
local function write_file(path, text)
  local ok, err, code = fs.write_file(path, text)
  if ok then return ok end
  if code == 'ENOENT' or code == 'ENOTDIR' then
    err = string.format('%s (plots make no folder: make %s first, e.g. with qoslab.fs.mkdir_p)', err,
      path:match('^(.*)/[^/]*$') or '.')
  end
  return nil, err, code
end

local function num(v)
  if v == nil or v ~= v then return 'NaN' end
  return string.format('%.10g', v)
end

local FORMATS = { png = true, svg = true }

-- opts.formats, default png and svg. level as in check.fail (1, the
-- default: the caller of the function calling this).
local function check_formats(ctx, formats, level)
  local L = (level or 1) + 1
  formats = formats or { 'png', 'svg' }
  check.table(ctx, 'opts.formats', formats, L)
  for i, f in ipairs(formats) do
    if not FORMATS[f] then check.fail(ctx, 'opts.formats[' .. i .. ']', '"png" or "svg"', f, L) end
  end
  return formats
end

--- opts.size: `{width, height}` in pixels, from `min` (default {100,
-- 100}) up to 10000 wide and 20000 high.
-- @tparam string ctx the public function's name for messages
-- @param size the caller's `opts.size`
-- @tparam table|nil default returned for a nil size
-- @tparam[opt=1] integer level as in `qoslab.check.fail`
-- @tparam[opt] table min `{width, height}`: the smallest the plot can lay out
-- @treturn table size
-- @raise `"<ctx>: opts.size...: expected ..."`, naming the entry
function M.check_size(ctx, size, default, level, min)
  local L = (level or 1) + 1
  if size == nil then return default end
  if type(size) ~= 'table' or #size ~= 2 then
    check.fail(ctx, 'opts.size', '{width, height} in pixels', size, L)
  end
  min = min or { 100, 100 }
  check.integer(ctx, 'opts.size[1]', size[1], min[1], 10000, nil, L)
  check.integer(ctx, 'opts.size[2]', size[2], min[2], 20000, nil, L)
  return size
end

local function terminal(fmt, pngcairo, w, h)
  if fmt == 'svg' then
    return string.format("set terminal svg size %d,%d dynamic noenhanced font 'Sans,12' background rgb 'white'", w, h)
  end
  if pngcairo then
    return string.format("set terminal pngcairo size %d,%d noenhanced font 'Sans,11' background rgb 'white'", w, h)
  end
  return string.format("set terminal png size %d,%d noenhanced", w, h)
end

--- Write a gnuplot script that draws `body` once per format, and run it.
-- @tparam string base path without extension: writes `base.gp`, `base.FMT`
-- @tparam string prelude commands before the first terminal
-- @tparam string body the drawing commands (`plot ...`, or a multiplot)
-- @tparam table formats list of "png" | "svg"
-- @tparam table size `{width, height}` in pixels
-- @treturn table files `{gp = path, png = path, svg = path}` (those made)
-- @return or nil, message, "ENOENT" (no gnuplot; the script is written) |
--   "EIO" (gnuplot failed: its message; or wrote an empty file)
function M.render(base, prelude, body, formats, size)
  local gp, pngcairo = M.gnuplot()
  local files = {}
  local parts = { '# qoslab plot script: gnuplot ' .. comment_text(arg_path(base .. '.gp')), prelude }
  for _, fmt in ipairs(formats) do
    local out = base .. '.' .. fmt
    files[fmt] = out
    parts[#parts + 1] = terminal(fmt, pngcairo, size[1], size[2])
    parts[#parts + 1] = 'set output ' .. gq(out)
    parts[#parts + 1] = body
    parts[#parts + 1] = 'unset output'
  end
  local script = table.concat(parts, '\n') .. '\n'
  files.gp = base .. '.gp'
  local ok, err, wcode = write_file(files.gp, script)
  if not ok then return nil, err, wcode end
  if not gp then
    return nil, 'gnuplot not found: apt-get install gnuplot-nox', 'ENOENT'
  end
  local log = base .. '.gnuplot.log'
  -- gnuplot by argv, no shell: a path with quotes or `$` is just a path. It
  -- runs in this process's directory, where the script's relative paths
  -- point (in BASE's folder, as it ran before, a relative BASE "d/x" failed:
  -- "Cannot load input from 'd/x.gp'").
  local how, code, ecode = fs.run({ gp, arg_path(files.gp) }, { output = log })
  if how == nil then return nil, 'cannot run gnuplot: ' .. tostring(code), ecode end
  if how ~= 'exit' or code ~= 0 then
    local f = io.open(log, 'r')
    local msg = f and f:read('a') or ''
    if f then f:close() end
    return nil, string.format('gnuplot failed (%s %s): %s', tostring(how), tostring(code),
      msg:gsub('%s+$', '')), 'EIO'
  end
  os.remove(log)
  for _, fmt in ipairs(formats) do
    local f = io.open(files[fmt], 'rb')
    local sz = f and f:seek('end') or 0
    if f then f:close() end
    if sz == 0 then return nil, 'gnuplot wrote no ' .. files[fmt], 'EIO' end
  end
  return files
end

--- Split a picture's path into its base and format: "d/x.png" -> "d/x",
-- "png"; "d/x" -> "d/x", nil. An extension is a dot and a word that starts
-- with a letter at the end of the file's name ("x.jpg", "x.v2"; not
-- "loss_0.5"); one other than png or svg is refused, as are a path that
-- names a folder ("", "d/", "d/.", "d/..") and a value that is no string.
-- The one rule of `qoslab client --plot FILE` and the plot functions'
-- `opts.out`.
-- @param out the path
-- @treturn string|nil the path without its extension; nil when refused
-- @treturn string|nil "png", "svg", or nil for a path without extension
-- @usage local base, ext = gnuplot.picture_path('out/test.png') --> "out/test", "png"
function M.picture_path(out)
  if type(out) ~= 'string' then return nil end
  local name = out:match('[^/]*$')
  if name == '' or name == '.' or name == '..' then return nil end
  local ext = name:match('^.+%.(%a%w*)$')
  if ext == nil then return out end
  if not FORMATS[ext] then return nil end
  return out:sub(1, -#ext - 2), ext
end

--- The output path of a plot's options (`opts.out`, without extension: the
-- formats' ".png", ".svg" and the data's ".dat" are added, so a path
-- ending in .png or .svg is refused rather than drawn to "x.png.png"; any
-- other dot is part of the name). No folder is made: a missing one fails
-- the first write (ENOENT), as it fails `qoslab client --plot`.
-- @tparam string ctx the public function's name for messages
-- @tparam table opts the caller's options
-- @tparam[opt=1] integer level as in `qoslab.check.fail`
-- @treturn string the path
-- @raise `"<ctx>: opts.out: expected a path without extension, got ..."`
function M.base_of(ctx, opts, level)
  local out = opts.out
  local name = type(out) == 'string' and out:match('[^/]*$')
  local _, ext = M.picture_path(out)
  if not name or name == '' or name == '.' or name == '..' or ext then
    check.fail(ctx, 'opts.out', 'a path without extension', out, (level or 1) + 1)
  end
  return out
end

--- The output of a one-picture plot: `opts.out` with or without an
-- extension. "x.png" (or "x.svg") writes that file only (`x.gp`, `x.dat`
-- beside it); "x" writes every format of `opts.formats` (default png and
-- svg). No folder is made (as `base_of`).
-- @tparam string ctx the public function's name for messages
-- @tparam table opts the caller's options (`out`, `formats`)
-- @tparam[opt=1] integer level as in `qoslab.check.fail`
-- @treturn string base path without extension
-- @treturn table formats
-- @raise on a missing `out`, one with an extension other than .png or .svg,
--   or a bad `formats` entry, naming the field
function M.out_of(ctx, opts, level)
  local L = (level or 1) + 1
  local base, ext = M.picture_path(opts.out)
  if base == nil then
    check.fail(ctx, 'opts.out', 'a path (with .png or .svg, or without extension)', opts.out, L)
  end
  if ext and opts.formats == nil then return base, { ext } end
  return base, check_formats(ctx, opts.formats, L)
end

-- For the plot modules' scripts: gq(s) a gnuplot string literal (safe for
-- any bytes), num(v) a number ("NaN" for nil or NaN), check_formats(ctx,
-- list[, level]), write_file(path, text) (nil, message, CODE with advice
-- when the folder is missing).
M.gq, M.num, M.check_formats, M.write_file = gq, num, check_formats, write_file

return M
