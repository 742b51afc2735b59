from django.db import migrations, models


def best_from_verdict(apps, schema_editor):
    """The run's best figures are its stored verdict's (best_speed), never the search's own ratios."""
    Run = apps.get_model("search", "Run")
    for run in Run.objects.exclude(verdict={}).only("pk", "verdict").iterator():
        figure = (run.verdict or {}).get("best_speed") or {}
        measurable = figure.get("measurable", True)
        Run.objects.filter(pk=run.pk).update(best_speedup_vs_eager=figure.get("value") if measurable else None,
                                             best_runtime_ms=figure.get("runtime_ms"))


class Migration(migrations.Migration):

    dependencies = [
        ('search', '0005_steering'),
    ]

    operations = [
        migrations.AlterField(
            model_name='run',
            name='best_runtime_ms',
            field=models.FloatField(blank=True, help_text="The verdict's best figure's runtime (its protocol's).", null=True),
        ),
        migrations.AlterField(
            model_name='run',
            name='best_speedup_vs_eager',
            field=models.FloatField(blank=True, help_text="The verdict's best figure: its speed-up vs the reference.", null=True),
        ),
        migrations.AlterField(
            model_name='run',
            name='status',
            field=models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('paused', 'Paused'), ('settling', 'Settling'), ('finished', 'Finished'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], db_index=True, default='queued', max_length=12),
        ),
        migrations.RunPython(best_from_verdict, migrations.RunPython.noop),
    ]
