from django.db import transaction
from django.http import JsonResponse
from shop.models import Order
from shop.tasks import fulfil


def create_order(request):
    order = Order.objects.create(item=request.POST["item"])
    result = fulfil.enqueue(order.id)
    return JsonResponse({"order": order.id, "result_id": result.id, "status": result.status})


def create_order_on_commit(request):
    rollback = request.POST.get("rollback") == "1"
    seen = {}
    try:
        with transaction.atomic():
            order = Order.objects.create(item=request.POST["item"])
            result = fulfil.enqueue_on_commit(order.id)
            seen = {"result_id": result.id, "status": result.status}
            try:
                fulfil.get_result(result.id)
                seen["visible_before_commit"] = True
            except Exception as exc:
                seen["visible_before_commit"] = type(exc).__name__
            if rollback:
                raise RuntimeError("roll back")
    except RuntimeError:
        seen["rolled_back"] = True
    return JsonResponse(seen)
