# Copyright (c) gunique contributors
#
# Can the server of a test arbitrate INSERT ... ON CONFLICT with a gunique
# index?  From PostgreSQL 18 on, or on 15 and 17 with the core change of
# contrib-patches/, which says so in catalog/index.h (as src/compat.h
# tests when gunique is built).
package GuniqueOnConflict;

use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Exporter 'import';

our @EXPORT = qw(on_conflict_patched on_conflict_supported);

# Was the server built with the core change of contrib-patches/?
sub on_conflict_patched
{
	my ($node) = @_;
	my $index_h = $node->config_data('--includedir-server') . '/catalog/index.h';
	return -f $index_h
	  && slurp_file($index_h) =~ /^#define\s+SPECULATIVE_INDEX_ANY_ORDERED_AM\b/m;
}

sub on_conflict_supported
{
	my ($node) = @_;
	return $node->pg_version >= 18 || on_conflict_patched($node);
}

1;
