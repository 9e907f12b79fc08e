# Copyright (c) gunique contributors
#
# The archive PGXN takes: `make dist` makes gunique-VERSION.zip whose one
# folder holds what git archive gives of the commit and META.json, and that
# META.json follows PGXN's Meta Spec 1.0.0 (https://pgxn.org/spec/), with
# gunique.control's version.
#
# No validator of the spec is packaged for Debian or npm, so check_meta()
# below is our own check of what the spec says of each key it defines:
# the required keys (name, version, abstract, maintainer, license,
# provides, meta-spec), no keys it does not define but x_ ones, semantic
# versions, terms and tags, the license names, provides' extensions,
# prereqs' phases, relationships and version ranges, resources,
# release_status.  It is shown to refuse a broken copy of each.
#
# The tree under test is committed to a throwaway repository (the files
# git would track here: .gitignore keeps build products out, as in a
# clone), so that uncommitted changes are tested too and no repository is
# needed: tools/test-all runs the tests in a copy of the tree without one.

use strict;
use warnings;
use Cwd qw(getcwd);
use File::Temp qw(tempdir);
use IO::Uncompress::Unzip qw($UnzipError);
use JSON::PP;
use Test::More;

my $src = getcwd();
my $tmp = tempdir(CLEANUP => 1);

sub slurp
{
	my ($path) = @_;
	open(my $fh, '<:raw', $path) or die "cannot read $path: $!";
	local $/;
	return scalar <$fh>;
}

# Run a shell command in the source tree with the throwaway repository and
# the archive's folder in the environment; returns its output, and fails
# the test on a non-zero exit.
sub run_in_tree
{
	my ($what, $cmd) = @_;
	local $ENV{GIT_DIR} = "$tmp/git";
	local $ENV{GIT_WORK_TREE} = $src;
	local $ENV{GUNIQUE_DIST_DIR} = $tmp;
	my $out = `cd '$src' && $cmd 2>&1`;
	is($?, 0, $what) or diag($out);
	return $out;
}

# ---------------------------------------------------------------------
# The spec, as our own check: a list of what is wrong, empty if nothing.
# ---------------------------------------------------------------------

my $num = qr/(?:0|[1-9][0-9]*)/;
my $ident = qr/(?:[0-9A-Za-z-]+)/;
my $semver = qr/$num\.$num\.$num(?:-$ident(?:\.$ident)*)?(?:\+$ident(?:\.$ident)*)?/;
my %licenses = map { $_ => 1 } qw(agpl_3 apache_1_1 apache_2_0 artistic_1
  artistic_2 bsd freebsd gfdl_1_2 gfdl_1_3 gpl_1 gpl_2 gpl_3 lgpl_2_1
  lgpl_3_0 mit mozilla_1_0 mozilla_1_1 openssl perl_5 postgresql qpl_1_0
  ssleay sun zlib open_source restricted unrestricted unknown);

sub is_string { my ($v) = @_; return defined $v && !ref $v && length $v; }
sub is_term { my ($v) = @_; return is_string($v) && $v =~ /^[^\/\\\s\p{Cntrl}]{2,}$/; }
sub is_tag { my ($v) = @_; return is_string($v) && $v =~ /^[^\/\\\p{Cntrl}]{2,255}$/; }
sub is_version { my ($v) = @_; return is_string($v) && $v =~ /^$semver$/; }
sub is_uri { my ($v) = @_; return is_string($v) && $v =~ /^[A-Za-z][A-Za-z0-9+.-]*:\S+$/; }
sub is_custom { my ($k) = @_; return $k =~ /^[xX]_./; }

sub is_range
{
	my ($v) = @_;
	return 0 if !defined $v || ref $v;
	return 1 if $v eq '0';
	for my $part (split /,\s*/, $v, -1)
	{
		return 0 unless $part =~ /^(?:(?:[<>]=?|[=!]=)\s*)?$semver$/;
	}
	return 1;
}

# Keys of a hash the spec does not define (x_ keys are always allowed).
sub unknown_keys
{
	my ($h, $where, @known) = @_;
	my %k = map { $_ => 1 } @known;
	return map { "$where: unknown key \"$_\"" }
	  grep { !$k{$_} && !is_custom($_) } sort keys %$h;
}

sub check_meta
{
	my ($m) = @_;
	my @e;

	return ('not an object') unless ref $m eq 'HASH';
	push @e, unknown_keys($m, 'top level',
		qw(name version abstract maintainer license provides meta-spec
		  description generated_by tags no_index prereqs release_status
		  resources));
	for my $k (qw(name version abstract maintainer license provides meta-spec))
	{
		push @e, "required key \"$k\" missing" unless exists $m->{$k};
	}
	push @e, 'name is not a term' if exists $m->{name} && !is_term($m->{name});
	push @e, 'version is not a semantic version'
	  if exists $m->{version} && !is_version($m->{version});
	for my $k (qw(abstract description generated_by))
	{
		push @e, "$k is not a non-empty string"
		  if exists $m->{$k} && !is_string($m->{$k});
	}

	if (exists $m->{maintainer})
	{
		my $v = $m->{maintainer};
		push @e, 'maintainer is not a string or a list of strings'
		  unless is_string($v)
		  || (ref $v eq 'ARRAY' && @$v && !grep { !is_string($_) } @$v);
	}

	if (exists $m->{license})
	{
		my $v = $m->{license};
		my $ok =
			!ref $v ? defined $v && $licenses{$v}
		  : ref $v eq 'ARRAY' ? @$v && !grep { ref $_ || !$licenses{$_} } @$v
		  : ref $v eq 'HASH' ? %$v && !grep { !is_uri($_) } values %$v
		  : 0;
		push @e, 'license is not a known name, a list of them, or names with URIs'
		  unless $ok;
	}

	if (exists $m->{provides})
	{
		my $p = $m->{provides};
		if (ref $p ne 'HASH' || !%$p)
		{
			push @e, 'provides is not a non-empty object';
		}
		else
		{
			for my $ext (sort keys %$p)
			{
				my $x = $p->{$ext};
				push @e, "provides: \"$ext\" is not a term" unless is_term($ext);
				if (ref $x ne 'HASH')
				{
					push @e, "provides.$ext is not an object";
					next;
				}
				push @e, unknown_keys($x, "provides.$ext",
					qw(file version abstract docfile));
				push @e, "provides.$ext.file missing or not a path"
				  unless is_string($x->{file}) && length($x->{file}) >= 2;
				push @e, "provides.$ext.version missing or not a semantic version"
				  unless is_version($x->{version});
				push @e, "provides.$ext.abstract is not a non-empty string"
				  if exists $x->{abstract} && !is_string($x->{abstract});
				push @e, "provides.$ext.docfile is not a path"
				  if exists $x->{docfile}
				  && !(is_string($x->{docfile}) && length($x->{docfile}) >= 2);
			}
		}
	}

	if (exists $m->{'meta-spec'})
	{
		my $s = $m->{'meta-spec'};
		if (ref $s ne 'HASH')
		{
			push @e, 'meta-spec is not an object';
		}
		else
		{
			push @e, unknown_keys($s, 'meta-spec', qw(version url));
			push @e, 'meta-spec.version is not 1.0.x'
			  unless is_string($s->{version}) && $s->{version} =~ /^1\.0\.[0-9]+$/;
			push @e, 'meta-spec.url is not the spec\'s'
			  if exists $s->{url}
			  && !(is_string($s->{url})
				&& $s->{url} =~ m{^https?://pgxn\.org/meta/spec\.txt$});
		}
	}

	if (exists $m->{prereqs})
	{
		my $p = $m->{prereqs};
		if (ref $p ne 'HASH' || !%$p)
		{
			push @e, 'prereqs is not a non-empty object';
		}
		else
		{
			push @e, unknown_keys($p, 'prereqs',
				qw(configure build test runtime develop));
			for my $phase (grep { !is_custom($_) } sort keys %$p)
			{
				my $ph = $p->{$phase};
				if (ref $ph ne 'HASH' || !%$ph)
				{
					push @e, "prereqs.$phase is not a non-empty object";
					next;
				}
				push @e, unknown_keys($ph, "prereqs.$phase",
					qw(requires recommends suggests conflicts));
				for my $rel (grep { !is_custom($_) } sort keys %$ph)
				{
					my $r = $ph->{$rel};
					if (ref $r ne 'HASH' || !%$r)
					{
						push @e, "prereqs.$phase.$rel is not a non-empty object";
						next;
					}
					for my $name (sort keys %$r)
					{
						push @e, "prereqs.$phase.$rel: \"$name\" is not a term"
						  unless is_term($name);
						push @e, "prereqs.$phase.$rel.$name is not a version range"
						  unless is_range($r->{$name});
					}
				}
			}
		}
	}

	if (exists $m->{tags})
	{
		my $t = $m->{tags};
		push @e, 'tags is not a non-empty list of tags'
		  unless ref $t eq 'ARRAY' && @$t && !grep { !is_tag($_) } @$t;
	}

	if (exists $m->{no_index})
	{
		my $n = $m->{no_index};
		if (ref $n ne 'HASH')
		{
			push @e, 'no_index is not an object';
		}
		else
		{
			push @e, unknown_keys($n, 'no_index', qw(file directory));
			for my $k (qw(file directory))
			{
				push @e, "no_index.$k is not a list of paths"
				  if exists $n->{$k}
				  && !(ref $n->{$k} eq 'ARRAY' && !grep { !is_string($_) } @{ $n->{$k} });
			}
		}
	}

	push @e, 'release_status is not stable, testing or unstable'
	  if exists $m->{release_status}
	  && !(defined $m->{release_status}
		&& !ref $m->{release_status}
		&& $m->{release_status} =~ /^(?:stable|testing|unstable)$/);

	if (exists $m->{resources})
	{
		my $r = $m->{resources};
		if (ref $r ne 'HASH' || !%$r)
		{
			push @e, 'resources is not a non-empty object';
		}
		else
		{
			push @e, unknown_keys($r, 'resources',
				qw(homepage bugtracker repository));
			push @e, 'resources.homepage is not a URI'
			  if exists $r->{homepage} && !is_uri($r->{homepage});
			for my $k (qw(bugtracker repository))
			{
				next unless exists $r->{$k};
				if (ref $r->{$k} ne 'HASH' || !%{ $r->{$k} })
				{
					push @e, "resources.$k is not a non-empty object";
					next;
				}
				my @fields = $k eq 'bugtracker' ? qw(web mailto) : qw(url web type);
				push @e, unknown_keys($r->{$k}, "resources.$k", @fields);
				for my $f (grep { $_ ne 'type' && $_ ne 'mailto' } @fields)
				{
					push @e, "resources.$k.$f is not a URI"
					  if exists $r->{$k}{$f} && !is_uri($r->{$k}{$f});
				}
				push @e, "resources.$k.$_ is not a string"
				  for grep { exists $r->{$k}{$_} && !is_string($r->{$k}{$_}) }
				  qw(type mailto);
			}
		}
	}
	return @e;
}

# ---------------------------------------------------------------------
# The version META.json must carry: gunique.control's, as a semantic
# version (1.8 is 1.8.0).
# ---------------------------------------------------------------------

my ($control_version) =
  slurp("$src/gunique.control") =~ /^default_version = '([^']*)'$/m;
ok(defined $control_version, 'gunique.control has a default_version');
like($control_version, qr/^[0-9]+(?:\.[0-9]+){0,2}$/,
	'gunique.control\'s version has up to three numbers');
my @parts = split /\./, $control_version;
push @parts, 0 while @parts < 3;
my $version = join '.', @parts;
my $top = "gunique-$version";

# The oldest PostgreSQL compat.h accepts, which META.json must require.
my ($min_pg) = slurp("$src/src/compat.h") =~ /^#if PG_VERSION_NUM < ([0-9]+)0000\n#error/m;
ok(defined $min_pg, 'compat.h refuses PostgreSQL before a major version');

# ---------------------------------------------------------------------
# make dist, from a throwaway repository of this tree.
# ---------------------------------------------------------------------

run_in_tree('throwaway repository made', 'git init -q');
run_in_tree('the tree committed to it',
	'git add -A && git -c user.name=gunique-test -c user.email=test@localhost'
	  . ' commit -q -m "tree under test"');
my @tracked = grep { length } split /\0/,
  run_in_tree('its files listed', 'git ls-files -z');
my $dist_out = run_in_tree('make dist succeeds', 'make -s dist');
my $zip = "$tmp/$top.zip";
ok(-f $zip, "make dist made $top.zip") or BAIL_OUT("no archive: $dist_out");

# The archive's members, and the content of its META.json.
my (@members, %count, $meta_text);
my $u = IO::Uncompress::Unzip->new($zip)
  or BAIL_OUT("cannot open $zip: $UnzipError");
for (my $status = 1; $status > 0; $status = $u->nextStream)
{
	my $name = $u->getHeaderInfo->{Name};
	my ($data, $buf) = ('', '');
	my $r;
	$data .= $buf while ($r = $u->read($buf)) > 0;
	BAIL_OUT("cannot read $name from $zip: $UnzipError") if $r < 0;
	push @members, $name;
	$count{$name}++;
	$meta_text = $data if $name eq "$top/META.json";
}
$u->close;

is_deeply([ grep { $count{$_} > 1 } sort keys %count ], [], 'no member twice');
is_deeply([ grep { index($_, "$top/") != 0 } @members ], [],
	"every member is under $top/");
my %files = map { substr($_, length("$top/")) => 1 } grep { !m{/$} } @members;
ok($files{'META.json'}, "META.json at the top of $top/");

# What git archive gives of the commit, and META.json: nothing else.
is_deeply([ sort grep { $_ ne 'META.json' } keys %files ], [ sort @tracked ],
	'the other members are the commit\'s files');
for my $f ('gunique.control', 'Makefile', 'README.md', 'src/gunique.c',
	map { s{^\Q$src\E/}{}r } glob("$src/gunique--*.sql"))
{
	ok($files{$f}, "the archive holds $f");
}
ok(scalar(grep { /^gunique--[0-9.]+--\Q$control_version\E\.sql$/ } keys %files),
	"the archive holds the script that updates to $control_version");
is_deeply(
	[
		sort grep {
			m{(?:^|/)(?:\.git|tmp_check|results-regress|results-isolation|results|log)/}
			  || /\.(?:o|so|bc|zip|dylib)$/
			  || m{(?:^|/)regression\.(?:diffs|out)$}
		} keys %files
	],
	[],
	'no build products, test results or repository in the archive');

# ---------------------------------------------------------------------
# META.json: valid, the version gunique.control's, made from the template.
# ---------------------------------------------------------------------

my $meta = eval { JSON::PP->new->utf8->decode($meta_text // '') };
ok($meta, 'META.json is JSON') or diag($@);
is_deeply([ check_meta($meta) ], [], 'META.json follows PGXN Meta Spec 1.0.0');
is($meta->{name}, 'gunique', 'name is gunique');
is($meta->{version}, $version, "version is gunique.control's ($version)");
is($meta->{provides}{gunique}{version}, $version,
	'the extension gunique is provided at that version');
for my $k (qw(file docfile))
{
	ok($files{ $meta->{provides}{gunique}{$k} // '' },
		"provides.gunique.$k is in the archive");
}
like($meta->{prereqs}{runtime}{requires}{PostgreSQL} // '',
	qr/^>= $min_pg\.0\.0(?:,|$)/,
	"PostgreSQL $min_pg or later is required, as compat.h does");
my $template = slurp("$src/tools/META.json.in") =~ s/\@VERSION\@/$version/gr;
is_deeply($meta, JSON::PP->new->utf8->decode($template),
	'META.json is tools/META.json.in with the version filled in');

# ---------------------------------------------------------------------
# check_meta refuses what the spec refuses: a broken copy of each key.
# ---------------------------------------------------------------------

my @broken = (
	[ 'no license' => sub { delete $_[0]{license} } ],
	[ 'no provides' => sub { delete $_[0]{provides} } ],
	[ 'no meta-spec' => sub { delete $_[0]{'meta-spec'} } ],
	[ 'version 1.8, not semantic' => sub { $_[0]{version} = '1.8' } ],
	[ 'a license PGXN does not name' => sub { $_[0]{license} = 'PostgreSQL License' } ],
	[ 'an extension without file' => sub { delete $_[0]{provides}{gunique}{file} } ],
	[ 'an extension version not semantic' =>
		  sub { $_[0]{provides}{gunique}{version} = '1.8' } ],
	[ 'an unknown extension key' => sub { $_[0]{provides}{gunique}{sql} = 'x' } ],
	[ 'a bad version range' =>
		  sub { $_[0]{prereqs}{runtime}{requires}{PostgreSQL} = '>= 15' } ],
	[ 'an unknown phase' => sub { $_[0]{prereqs}{install} = { requires => { x1 => 0 } } } ],
	[ 'an unknown relationship' =>
		  sub { $_[0]{prereqs}{runtime}{needs} = { x1 => 0 } } ],
	[ 'meta-spec 2.0.0' => sub { $_[0]{'meta-spec'}{version} = '2.0.0' } ],
	[ 'an unknown top-level key' => sub { $_[0]{homepage} = 'https://example.org' } ],
	[ 'a tag with a slash' => sub { $_[0]{tags} = ['a/b'] } ],
	[ 'release_status beta' => sub { $_[0]{release_status} = 'beta' } ],
	[ 'a repository without a URI' =>
		  sub { $_[0]{resources} = { repository => { url => 'here' } } } ],
	[ 'an empty maintainer' => sub { $_[0]{maintainer} = [] } ],
	[ 'a one-letter name' => sub { $_[0]{name} = 'g' } ]);
for my $case (@broken)
{
	my ($what, $break) = @$case;
	my $copy = JSON::PP->new->utf8->decode($meta_text // '{}');
	$break->($copy);
	ok(scalar(check_meta($copy)), "check_meta refuses $what");
}

done_testing();
